"""Fit, write and reuse k-means codebooks (layout: `models.wave.hubert_codebook`).

A codebook is named by its key, a hash of the shard set's fingerprint (from its manifest.json) and
every target setting; `ensure_codebook` keeps them under `<shards>/targets/<key>/` and fits one only
when no finished codebook with that key is there. A fit is written into a temporary sibling folder
and renamed into place at the end, so an interrupted fit never looks finished. Shards in a bucket
keep their codebooks in the bucket (`pipeline.targets.stored_codebook`).
"""

from __future__ import annotations

import datetime
import hashlib
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

import pipeline
from models.wave.hubert_codebook import (
    CENTROIDS_NAME,
    CODEBOOK_FORMAT_VERSION,
    CODEBOOK_MANIFEST_NAME,
    CodebookError,
    read_codebook,
)
from models.wave.hubert_teacher import FrozenHubertTeacher
from pipeline.shards.format import TARGETS_DIR_NAME, read_manifest
from pipeline.storage.bucket_check import without_query
from pipeline.storage.uri import child_location, is_uri
from pipeline.targets.features import FEATURE_PARAMETERS, crop_features
from pipeline.targets.kmeans import TooFewFramesError, fit_kmeans
from pipeline.targets.sample import check_waveform_manifest, read_sample_crops
from pipeline.targets.settings import TargetSettings
from pipeline.targets.stored_codebook import local_codebook, upload_codebook
from pipeline.targets.teacher import (
    load_teacher,
    save_teacher_weights,
    teacher_digest,
    teacher_features,
)


def print_progress(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def codebook_key(shard_fingerprint: str, settings: TargetSettings) -> str:
    """`<features>-k<clusters>-<12 hex>`: readable, and unique per (shards, settings, teacher weights)."""
    teacher = teacher_digest(settings.teacher_checkpoint) if settings.teacher_checkpoint is not None else None
    payload = json.dumps(
        {
            "format": CODEBOOK_FORMAT_VERSION,
            "shards": shard_fingerprint,
            "settings": settings.to_dict(),
            "teacher_weights": teacher,
        },
        sort_keys=True,
    )
    return f"{settings.features}-k{settings.clusters}-{hashlib.sha256(payload.encode()).hexdigest()[:12]}"


def codebook_dir(shards_dir: str | Path, settings: TargetSettings, cache_dir: str | Path | None = None) -> str | Path:
    """Where the codebook of these shards and settings lives: `<cache_dir or shards/targets>/<key>`, a
    local folder or a URI in a bucket (shards in a bucket keep their codebooks there by default)."""
    manifest = read_manifest(shards_dir)
    check_waveform_manifest(shards_dir, manifest)
    if cache_dir is None:
        cache_dir = child_location(shards_dir, TARGETS_DIR_NAME)
    return child_location(cache_dir, codebook_key(manifest["fingerprint"], settings))


def fit_codebook(
    shards_dir: str | Path,
    settings: TargetSettings,
    output_dir: str | Path,
    log: Callable[[str], None] = print_progress,
    device: str = "cpu",
) -> str | Path:
    """Sample crops, compute features, fit k-means, write `output_dir` (a folder or a URI); returns it.
    `device` runs the teacher of iteration-2 features (MFCC runs on the CPU)."""
    if is_uri(output_dir):  # fitted in a local folder of the same name, then uploaded
        key = str(output_dir).partition("?")[0].rstrip("/").rpartition("/")[2]
        with tempfile.TemporaryDirectory(prefix="audioscale-codebook-") as staging:
            fit_codebook(shards_dir, settings, Path(staging) / key, log, device)
            upload_codebook(Path(staging) / key, str(output_dir))
        log(f"targets: uploaded the codebook to {without_query(str(output_dir))}")
        return output_dir
    output_dir = Path(output_dir)
    started = time.monotonic()
    shard_manifest = read_manifest(shards_dir)
    teacher = None
    if settings.features == "hubert":
        teacher = load_teacher(settings.teacher_checkpoint, settings.teacher_layer, device)
        log(
            f"targets: teacher {teacher.description['teacher_model']} (step {teacher.description['teacher_step']}) "
            f"up to block {settings.teacher_layer}, on {device}"
        )
    sample = read_sample_crops(shards_dir, settings, log)
    if sample.rows_too_short:
        log(f"targets: skipped {sample.rows_too_short} drawn rows shorter than half a crop, as training skips them")
    if len(sample.crops) == 0:
        raise TooFewFramesError(
            f"all {sample.rows_drawn} drawn segment rows of {shards_dir} are shorter than half a crop "
            f"({settings.crop_frames // 2} frames), so training would skip them too: pass a shorter --crop-frames"
        )
    if teacher is None:
        features = crop_features(sample.crops, settings.features, log)
    else:
        features = teacher_features(teacher.teacher, sample.crops, log=log)
    log(
        f"targets: {len(sample.crops)} crops -> {len(features)} {settings.features} frames of {features.shape[1]} "
        f"values; fitting {settings.clusters} clusters (MiniBatchKMeans, {settings.n_init} inits)"
    )
    fit = fit_kmeans(features, settings)
    log(f"targets: inertia {fit.inertia:.4f} per frame after {fit.iterations} passes ({fit.steps} mini-batches)")
    manifest = _codebook_manifest(
        output_dir, settings, shards_dir, shard_manifest, sample, features, fit, teacher, time.monotonic() - started
    )
    write_codebook(output_dir, fit.centroids, manifest, teacher=None if teacher is None else teacher.teacher)
    log(f"targets: wrote {output_dir} ({CENTROIDS_NAME}, {CODEBOOK_MANIFEST_NAME}) in {manifest['elapsed_s']:.1f} s")
    return output_dir


def _codebook_manifest(output_dir, settings, shards_dir, shard_manifest, sample, features, fit, teacher, elapsed_s):
    """codebook.json: what was fitted, on which crops of which shards, with which k-means."""
    import sklearn

    return {
        "format_version": CODEBOOK_FORMAT_VERSION,
        "key": output_dir.name,
        "created_utc": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "audioscale_version": pipeline.__version__,
        "features": FEATURE_PARAMETERS[settings.features] if teacher is None else teacher.description,
        "clusters": settings.clusters,
        "feature_dim": int(features.shape[1]),
        "seed": settings.seed,
        "settings": settings.to_dict(),
        "sample": {
            "crops": len(sample.crops),
            "frames": len(features),
            "crop_frames": settings.crop_frames,
            "rows_total": sample.rows_total,
            "rows_drawn": sample.rows_drawn,
            "rows_too_short": sample.rows_too_short,
        },
        "shards": {
            "dir": str(shards_dir),
            "fingerprint": shard_manifest["fingerprint"],
            "preset": shard_manifest["preset"]["name"],
            "num_rows": shard_manifest.get("num_rows"),
            "total_hours": shard_manifest.get("total_hours"),
        },
        "kmeans": {
            "library": f"scikit-learn {sklearn.__version__} MiniBatchKMeans",
            **settings.kmeans_parameters(),
            "random_state": settings.seed,
            "inertia": fit.inertia,
            "iterations": fit.iterations,
            "steps": fit.steps,
        },
        "elapsed_s": round(elapsed_s, 3),
    }


def write_codebook(
    output_dir: Path, centroids: np.ndarray, manifest: dict, *, teacher: FrozenHubertTeacher | None = None
) -> None:
    """Write into `<output_dir>.tmp-<pid>`, then rename: the folder appears finished or not at all."""
    temporary = output_dir.with_name(f"{output_dir.name}.tmp-{os.getpid()}")
    shutil.rmtree(temporary, ignore_errors=True)
    temporary.mkdir(parents=True)
    np.save(temporary / CENTROIDS_NAME, centroids.astype(np.float32))
    if teacher is not None:
        save_teacher_weights(teacher, temporary)
    (temporary / CODEBOOK_MANIFEST_NAME).write_text(json.dumps(manifest, indent=2) + "\n")
    if output_dir.exists():  # an unfinished or damaged earlier fit (a finished one is reused before we get here)
        shutil.rmtree(output_dir)
    temporary.rename(output_dir)


def finished_codebook(directory: str | Path, shard_fingerprint: str, settings: TargetSettings) -> bool:
    """A readable codebook made from these shards with these settings is in `directory` (a folder or a URI)."""
    try:
        manifest = read_codebook(local_codebook(directory)).manifest
    except CodebookError:
        return False
    return manifest["shards"]["fingerprint"] == shard_fingerprint and manifest["settings"] == settings.to_dict()


def ensure_codebook(
    shards_dir: str | Path,
    *,
    features: str = "mfcc",
    clusters: int | None = None,
    crop_frames: int = 500,
    sample_fraction: float = 0.1,
    max_sample_crops: int | None = None,
    seed: int = 0,
    teacher_checkpoint: str | Path | None = None,
    teacher_layer: int | None = None,
    cache_dir: str | Path | None = None,
    device: str = "cpu",
    log: Callable[[str], None] = print_progress,
) -> str | Path:
    """The codebook directory for these shards and settings: reused when a finished one is cached,
    fitted otherwise. Unset `clusters`, `max_sample_crops` and `teacher_layer` take HuBERT's choices for
    the features (mfcc: k 100; hubert: k 500, layer 6, at most 2,000 crops)."""
    settings = TargetSettings.for_features(
        features, clusters=clusters, crop_frames=crop_frames, sample_fraction=sample_fraction,
        max_sample_crops=max_sample_crops, seed=seed, teacher_layer=teacher_layer,
        teacher_checkpoint=None if teacher_checkpoint is None else str(teacher_checkpoint),
    )  # fmt: skip
    directory = codebook_dir(shards_dir, settings, cache_dir)
    if finished_codebook(directory, read_manifest(shards_dir)["fingerprint"], settings):
        log(f"targets: reusing {directory} (same shards and settings)")
        return directory
    return fit_codebook(shards_dir, settings, directory, log, device)
