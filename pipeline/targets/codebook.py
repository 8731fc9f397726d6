"""Fit, write and reuse k-means codebooks (layout: `models.hubert_codebook`).

A codebook is named by its key, a hash of the shard set's fingerprint (from its manifest.json) and
every target setting; `ensure_codebook` keeps them under `<shards>/targets/<key>/` and fits one only
when no finished codebook with that key is there. A fit is written into a temporary sibling folder
and renamed into place at the end, so an interrupted fit never looks finished.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import os
import shutil
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

import pipeline
from models.hubert_codebook import (
    CENTROIDS_NAME,
    CODEBOOK_FORMAT_VERSION,
    CODEBOOK_MANIFEST_NAME,
    CodebookError,
    read_codebook,
)
from pipeline.shards.format import read_manifest
from pipeline.shards.location import is_uri
from pipeline.targets.features import FEATURE_PARAMETERS, crop_features
from pipeline.targets.kmeans import fit_kmeans
from pipeline.targets.sample import check_waveform_manifest, read_sample_crops
from pipeline.targets.settings import HUBERT_CLUSTERS, TargetSettings

TARGETS_DIR_NAME = "targets"  # under the shard directory: the cache of its codebooks


def print_progress(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def codebook_key(shard_fingerprint: str, settings: TargetSettings) -> str:
    """`<features>-k<clusters>-<12 hex>`: readable, and unique per (shards, settings)."""
    payload = json.dumps({"format": CODEBOOK_FORMAT_VERSION, "shards": shard_fingerprint,
                          "settings": settings.to_dict()}, sort_keys=True)
    return f"{settings.features}-k{settings.clusters}-{hashlib.sha256(payload.encode()).hexdigest()[:12]}"


def codebook_dir(shards_dir: str | Path, settings: TargetSettings, cache_dir: Path | None = None) -> Path:
    """Where the codebook of these shards and settings lives: `<cache_dir or shards/targets>/<key>`."""
    manifest = read_manifest(shards_dir)
    check_waveform_manifest(shards_dir, manifest)
    if cache_dir is None:
        if is_uri(shards_dir):
            raise ValueError(f"shards at {shards_dir} are not a local folder: pass a local --output folder for the codebook")
        cache_dir = Path(shards_dir) / TARGETS_DIR_NAME
    return Path(cache_dir) / codebook_key(manifest["fingerprint"], settings)


def fit_codebook(shards_dir: str | Path, settings: TargetSettings, output_dir: Path,
                 log: Callable[[str], None] = print_progress) -> Path:
    """Sample crops, compute features, fit k-means, write `output_dir`; returns it."""
    started = time.monotonic()
    shard_manifest = read_manifest(shards_dir)
    sample = read_sample_crops(shards_dir, settings, log)
    if sample.rows_too_short:
        log(f"targets: skipped {sample.rows_too_short} drawn rows shorter than half a crop, as training skips them")
    features = crop_features(sample.crops, settings.features, log)
    log(f"targets: {len(sample.crops)} crops -> {len(features)} {settings.features} frames of {features.shape[1]} "
        f"values; fitting {settings.clusters} clusters (MiniBatchKMeans, {settings.n_init} inits)")
    fit = fit_kmeans(features, settings)
    log(f"targets: inertia {fit.inertia:.4f} per frame after {fit.iterations} passes ({fit.steps} mini-batches)")
    import sklearn

    manifest = {
        "format_version": CODEBOOK_FORMAT_VERSION,
        "key": output_dir.name,
        "created_utc": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "audioscale_version": pipeline.__version__,
        "features": FEATURE_PARAMETERS[settings.features],
        "clusters": settings.clusters,
        "feature_dim": int(features.shape[1]),
        "seed": settings.seed,
        "settings": settings.to_dict(),
        "sample": {"crops": len(sample.crops), "frames": len(features), "crop_frames": settings.crop_frames,
                   "rows_total": sample.rows_total, "rows_drawn": sample.rows_drawn,
                   "rows_too_short": sample.rows_too_short},
        "shards": {"dir": str(shards_dir), "fingerprint": shard_manifest["fingerprint"],
                   "preset": shard_manifest["preset"]["name"], "num_rows": shard_manifest.get("num_rows"),
                   "total_hours": shard_manifest.get("total_hours")},
        "kmeans": {"library": f"scikit-learn {sklearn.__version__} MiniBatchKMeans", **settings.kmeans_parameters(),
                   "random_state": settings.seed, "inertia": fit.inertia, "iterations": fit.iterations,
                   "steps": fit.steps},
        "elapsed_s": round(time.monotonic() - started, 3),
    }
    write_codebook(output_dir, fit.centroids, manifest)
    log(f"targets: wrote {output_dir} ({CENTROIDS_NAME}, {CODEBOOK_MANIFEST_NAME}) in {manifest['elapsed_s']:.1f} s")
    return output_dir


def write_codebook(output_dir: Path, centroids: np.ndarray, manifest: dict) -> None:
    """Write into `<output_dir>.tmp-<pid>`, then rename: the folder appears finished or not at all."""
    temporary = output_dir.with_name(f"{output_dir.name}.tmp-{os.getpid()}")
    shutil.rmtree(temporary, ignore_errors=True)
    temporary.mkdir(parents=True)
    np.save(temporary / CENTROIDS_NAME, centroids.astype(np.float32))
    (temporary / CODEBOOK_MANIFEST_NAME).write_text(json.dumps(manifest, indent=2) + "\n")
    if output_dir.exists():  # an unfinished or damaged earlier fit (a finished one is reused before we get here)
        shutil.rmtree(output_dir)
    temporary.rename(output_dir)


def finished_codebook(directory: Path, shard_fingerprint: str, settings: TargetSettings) -> bool:
    """A readable codebook made from these shards with these settings is in `directory`."""
    try:
        manifest = read_codebook(directory).manifest
    except CodebookError:
        return False
    return manifest["shards"]["fingerprint"] == shard_fingerprint and manifest["settings"] == settings.to_dict()


def ensure_codebook(shards_dir: Path, *, features: str = "mfcc", clusters: int | None = None, crop_frames: int = 500,
                    sample_fraction: float = 0.1, max_sample_crops: int = 20_000, seed: int = 0,
                    cache_dir: Path | None = None, log: Callable[[str], None] = print_progress) -> Path:
    """The codebook directory for these shards and settings: reused when a finished one is cached,
    fitted otherwise. `clusters` defaults to HuBERT's choice for the features (mfcc: 100)."""
    settings = TargetSettings(features=features, clusters=HUBERT_CLUSTERS.get(features, 2) if clusters is None else clusters,
                              crop_frames=crop_frames, sample_fraction=sample_fraction,
                              max_sample_crops=max_sample_crops, seed=seed)
    directory = codebook_dir(shards_dir, settings, cache_dir)
    if finished_codebook(directory, read_manifest(shards_dir)["fingerprint"], settings):
        log(f"targets: reusing {directory} (same shards and settings)")
        return directory
    return fit_codebook(shards_dir, settings, directory, log)
