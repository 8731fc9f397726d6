"""HuBERT iteration 2's feature source: a trained HuBERT checkpoint cut after one layer.

`load_teacher` reads the checkpoint (sha256-checked, `pipeline.checkpoint`), keeps its encoder's
first `layer` blocks as a `models.wave.hubert_teacher.FrozenHubertTeacher`, and describes it for the
codebook manifest; the codebook folder then stores those weights, so students need only the folder.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch

from models.wave.hubert import HuBERT
from models.wave.hubert_teacher import (
    TEACHER_WEIGHTS_NAME,
    FrozenHubertTeacher,
    truncated_teacher_config,
)
from pipeline.checkpoint import (
    DIGESTS_KEY,
    WEIGHTS_FILE,
    load_model_from_checkpoint,
    read_checkpoint_meta,
)


@dataclasses.dataclass(frozen=True, kw_only=True)
class LoadedTeacher:
    teacher: FrozenHubertTeacher
    description: dict  # the codebook manifest's "features" entry


def teacher_digest(checkpoint_dir: str | Path) -> str:
    """sha256 of the checkpoint's weights, as its model.json records them: part of the codebook's key."""
    return str(read_checkpoint_meta(checkpoint_dir)[DIGESTS_KEY][WEIGHTS_FILE])


def load_teacher(checkpoint_dir: str | Path, layer: int, device: str = "cpu") -> LoadedTeacher:
    model, meta = load_model_from_checkpoint(checkpoint_dir)
    if not isinstance(model, HuBERT):  # a wrong --teacher is the user's input: ValueError, one line at the CLI
        raise ValueError(  # noqa: TRY004
            f"--teacher {checkpoint_dir} holds a {meta['model_name']!r} checkpoint; iteration-2 targets are a "
            "HuBERT's layer output: pass a checkpoint of a hubert-* model"
        )
    config = truncated_teacher_config(model.config, layer)
    teacher = FrozenHubertTeacher(config)
    kept = teacher.encoder.state_dict().keys()
    teacher.encoder.load_state_dict({name: value for name, value in model.encoder.state_dict().items() if name in kept})
    description = {
        "kind": "hubert", "function": "models.wave.hubert_teacher.FrozenHubertTeacher (block `layer`'s output)",
        "layer": layer, "dim": config.encoder_dim, "frame_rate_hz": 50,
        "teacher_checkpoint": str(checkpoint_dir), "teacher_model": meta["model_name"],
        "teacher_step": meta.get("step"), "teacher_weights_sha256": meta[DIGESTS_KEY][WEIGHTS_FILE],
        "teacher_config": dataclasses.asdict(config),
        "input": "each crop normalised as the training reader does (waveform preset: per segment)",
    }  # fmt: skip
    return LoadedTeacher(teacher=teacher.to(device), description=description)


def save_teacher_weights(teacher: FrozenHubertTeacher, directory: Path) -> None:
    import safetensors.torch

    safetensors.torch.save_model(teacher.encoder, str(directory / TEACHER_WEIGHTS_NAME), force_contiguous=True)


def teacher_features(
    teacher: FrozenHubertTeacher,
    crops: np.ndarray,
    *,
    batch_size: int = 8,
    log: Callable[[str], None] = lambda line: None,
) -> np.ndarray:
    """float32 (n, T, 320) crops -> float32 (n x T, dim): the teacher layer's output, one row per 20 ms frame."""
    device = next(teacher.parameters()).device
    started, last_report, rows = time.monotonic(), time.monotonic(), []
    for start in range(0, len(crops), batch_size):
        batch = torch.from_numpy(np.ascontiguousarray(crops[start : start + batch_size])).to(device)
        frames = teacher(batch)
        rows.append(frames.reshape(-1, frames.shape[-1]).float().cpu().numpy())
        if time.monotonic() - last_report > 10.0:
            last_report = time.monotonic()
            log(
                f"targets: teacher features of {start + len(batch)}/{len(crops)} crops ({time.monotonic() - started:.0f} s)"
            )
    return np.concatenate(rows) if rows else np.zeros((0, teacher.config.encoder_dim), np.float32)
