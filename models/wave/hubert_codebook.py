"""The k-means codebook directory HuBERT's targets come from: its layout and its reader.

`python -m pipeline.targets` writes it; a HuBERT model reads it when built (`codebook=DIR`) and
keeps the centroids as a buffer, so every checkpoint carries the codebook it was trained on.

Layout:
- `centroids.npy`: float32 (clusters, feature_dim), row c = centroid of cluster c.
- `teacher.safetensors` (features "hubert" only): the frozen teacher's weights up to the chosen
  layer; codebook.json's features.teacher_config rebuilds its modules (models/wave/hubert_teacher.py).
- `codebook.json`: {"format_version", "features": {"kind": "mfcc", ...every parameter},
  "clusters", "feature_dim", "sample": {...}, "seed", "shards": {"dir", "fingerprint", ...},
  "kmeans": {every MiniBatchKMeans parameter, "inertia", "iterations", "steps"}, "created_utc", ...}.
  Written last, so a directory with centroids but no codebook.json is an unfinished fit.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import torch
from torch import nn

from models.wave.hubert_config import HubertConfig
from models.wave.hubert_labels import MfccFrameLabeller
from models.wave.hubert_teacher import (
    TEACHER_WEIGHTS_NAME,
    FrozenHubertTeacher,
    TeacherFrameLabeller,
)

CENTROIDS_NAME = "centroids.npy"
CODEBOOK_MANIFEST_NAME = "codebook.json"
CODEBOOK_FORMAT_VERSION = 1
MAKE_ONE = "make one with: python -m pipeline.targets --shards SHARD_DIR (a `waveform` prep output)"


class CodebookError(ValueError):
    """A codebook directory that is missing, unfinished or damaged."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class Codebook:
    centroids: np.ndarray  # float32 (clusters, feature_dim)
    manifest: dict

    @property
    def clusters(self) -> int:
        return int(self.centroids.shape[0])

    @property
    def features_kind(self) -> str:
        return str(self.manifest["features"]["kind"])


def read_codebook(directory: str | Path) -> Codebook:
    """The codebook in `directory`; raises `CodebookError` saying how to make one when it is not there."""
    directory = Path(directory)
    manifest_path, centroids_path = directory / CODEBOOK_MANIFEST_NAME, directory / CENTROIDS_NAME
    if not manifest_path.is_file():
        what = "an unfinished fit (centroids without codebook.json)" if centroids_path.exists() else "no codebook"
        raise CodebookError(f"{directory} holds {what}; {MAKE_ONE}")
    try:
        manifest = json.loads(manifest_path.read_text())
        centroids = np.load(centroids_path, allow_pickle=False)
    except (json.JSONDecodeError, OSError, ValueError) as error:
        raise CodebookError(f"{directory} is damaged ({error}); delete it and {MAKE_ONE}") from None
    expected = (manifest.get("clusters"), manifest.get("feature_dim"))
    if centroids.ndim != 2 or tuple(centroids.shape) != expected:
        raise CodebookError(
            f"{centroids_path} is {tuple(centroids.shape)}, codebook.json says (clusters, feature_dim) = "
            f"{expected}; delete {directory} and {MAKE_ONE}"
        )
    return Codebook(centroids=centroids.astype(np.float32), manifest=manifest)


def frame_labeller(directory: str | Path, codebook: Codebook) -> nn.Module:
    """The module that labels (batch, T, 320) crops with this codebook's clusters, one per 20 ms frame:
    MFCC features (iteration 1) or a frozen teacher's layer output (iteration 2)."""
    centroids = torch.from_numpy(codebook.centroids)
    if codebook.features_kind == "mfcc":
        return MfccFrameLabeller(centroids)
    if codebook.features_kind == "hubert":
        teacher = FrozenHubertTeacher(HubertConfig(**codebook.manifest["features"]["teacher_config"]))
        teacher.load_weights(Path(directory) / TEACHER_WEIGHTS_NAME)
        return TeacherFrameLabeller(teacher, centroids)
    raise CodebookError(
        f"{directory} clusters {codebook.features_kind!r} features, which no labeller computes; {MAKE_ONE}"
    )
