"""Training reader: a shard directory (local path or URI) -> Ray Dataset of fixed-size random log-mel crops.

Policies:
- One crop per segment row per pass; the crop start is drawn from a generator seeded by
  (`seed`, clip_id), so the same seed gives the same crops on any machine and in any block order.
  Pass a different seed per epoch for fresh crops.
- Normalisation (`normalize=True`) follows the preset recorded in the manifest: presets with
  `normalize_per_clip` (audiomae) standardise each segment by its own mean/std
  (`frontend.normalize_clip`, over the whole segment, before cropping); the others (dasheng) use
  the manifest's per-bin dataset mean/std.
- Segments shorter than `crop_frames` but at least `min_frames` long (default: half a crop) are
  padded at the end with the segment's minimum value, i.e. its quietest level, which after log
  compression is what silence looks like. Shorter segments are skipped; they are counted in
  `count_short_segments` so a caller can report how much data the threshold drops.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pipeline.frontend import normalize_clip
from pipeline.shard_location import locate_shards
from pipeline.shards import PART_GLOB, mel_matrices, read_manifest, read_shard_table


def _row_rng(seed: int, clip_id: str) -> np.random.Generator:
    clip_key = int.from_bytes(hashlib.blake2b(clip_id.encode(), digest_size=8).digest(), "little")
    return np.random.default_rng([seed, clip_key])


def crop_or_pad(mel: np.ndarray, crop_frames: int, rng: np.random.Generator) -> np.ndarray:
    """A random window of `crop_frames` frames; shorter input is padded at the end with its minimum."""
    num_frames = len(mel)
    if num_frames >= crop_frames:
        start = int(rng.integers(0, num_frames - crop_frames + 1))
        return mel[start : start + crop_frames]
    padding = np.full((crop_frames - num_frames, mel.shape[1]), mel.min(), dtype=mel.dtype)
    return np.concatenate([mel, padding])


class CropBatch:
    """map_batches UDF: a pyarrow batch of segment rows -> {"mel": float32 (batch, crop_frames, n_mels)}."""

    def __init__(self, *, crop_frames: int, min_frames: int, seed: int, n_mels: int, split: str | None,
                 per_clip: bool, bin_mean: np.ndarray | None, bin_std: np.ndarray | None):
        self.crop_frames, self.min_frames, self.seed, self.n_mels = crop_frames, min_frames, seed, n_mels
        self.split, self.per_clip, self.bin_mean, self.bin_std = split, per_clip, bin_mean, bin_std

    def __call__(self, batch: pa.Table) -> dict[str, np.ndarray]:
        keep = pc.greater_equal(batch["num_frames"], self.min_frames)
        if self.split is not None:
            keep = pc.and_(keep, pc.fill_null(pc.equal(batch["split"], self.split), False))
        batch = batch.filter(keep)
        crops = np.empty((batch.num_rows, self.crop_frames, self.n_mels), dtype=np.float32)
        for row, (clip_id, mel16) in enumerate(zip(batch["clip_id"].to_pylist(), mel_matrices(batch["mel"]))):
            mel = mel16.astype(np.float32)  # (frames, n_mels)
            if self.per_clip:
                mel = normalize_clip(mel)
            elif self.bin_mean is not None:
                mel = (mel - self.bin_mean) / self.bin_std
            crops[row] = crop_or_pad(mel, self.crop_frames, _row_rng(self.seed, clip_id))
        return {"mel": crops}


def count_short_segments(shard_dir: str | Path, *, crop_frames: int, min_frames: int | None = None) -> int:
    """How many segment rows `crop_dataset` skips for being shorter than `min_frames`."""
    min_frames = crop_frames // 2 if min_frames is None else min_frames
    frames = read_shard_table(shard_dir, columns=["num_frames"])["num_frames"].to_numpy()
    return int((frames < min_frames).sum())


def build_crop_dataset(shard_dir: str | Path, *, crop_frames: int, seed: int, normalize: bool = True,
                       split: str | None = None, min_frames: int | None = None, num_cpus_per_task: float = 0.5,
                       file_order_seed: int | None = None):
    """See the module docstring; fractional CPUs keep the reader from starving training workers.

    `file_order_seed`: read the part files in an order shuffled with this seed (None: sorted order)."""
    import ray.data

    if crop_frames <= 0:
        raise ValueError(f"crop_frames must be positive, got {crop_frames}")
    manifest = read_manifest(shard_dir)
    location = locate_shards(shard_dir)
    files = [location.child_path(name) for name in location.file_names(PART_GLOB)]
    if not files:
        raise ValueError(f"{shard_dir} has no rows to crop (num_rows={manifest.get('num_rows')})")
    if split is not None and split not in manifest.get("rows_by_split", {}):
        raise ValueError(
            f"{shard_dir} has no rows with split {split!r}; splits present: {sorted(manifest.get('rows_by_split', {}))}"
        )
    per_clip = bool(normalize and manifest["preset"]["normalize_per_clip"])
    use_dataset_stats = normalize and not per_clip
    columns = ["clip_id", "num_frames", "mel"] + (["split"] if split is not None else [])
    udf = CropBatch(
        crop_frames=crop_frames,
        min_frames=crop_frames // 2 if min_frames is None else min_frames,
        seed=seed,
        n_mels=int(manifest["n_mels"]),
        split=split,
        per_clip=per_clip,
        bin_mean=np.asarray(manifest["mean"], np.float32) if use_dataset_stats else None,
        bin_std=np.maximum(np.asarray(manifest["std"], np.float32), 1e-5) if use_dataset_stats else None,
    )
    # The filesystem travels with the read tasks, so every node opens the same bucket or folder.
    # Shards are never hive-partitioned: a `key=value` folder in the location is just a name.
    # A file-order shuffle happens at read time and keeps the read streaming, unlike a block-order
    # shuffle after it (an all-to-all barrier that waits for every block before the first batch).
    shuffle = None if file_order_seed is None else ray.data.FileShuffleConfig(seed=file_order_seed, reseed_after_execution=False)
    dataset = ray.data.read_parquet(
        files, filesystem=location.filesystem, columns=columns, partitioning=None, shuffle=shuffle
    )
    return dataset.map_batches(udf, batch_format="pyarrow", batch_size=64, num_cpus=num_cpus_per_task)
