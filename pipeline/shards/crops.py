"""Training reader: a shard directory (local path or URI) -> Ray Dataset of fixed-size random log-mel crops.

Policies:
- One crop per segment row per pass; the crop start is drawn from a generator seeded by
  (`seed`, clip_id), so the same seed gives the same crops on any machine and in any block order.
  Each epoch of a multi-epoch dataset (`epochs`) crops with its own seed.
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

import copy
import hashlib
import random
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from pipeline.audio.frontend import normalize_clip
from pipeline.shards.format import (
    checked_part_names,
    mel_matrices,
    read_manifest,
    read_shard_table,
)
from pipeline.shards.holdout import keep_side
from pipeline.shards.location import locate_shards


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
        self.holdout: tuple[str | None, float] = (None, 0.0)  # (side, fraction): pipeline.shards.holdout

    def __call__(self, batch: pa.Table) -> dict[str, np.ndarray]:
        keep = pc.greater_equal(batch["num_frames"], self.min_frames)
        if self.split is not None:
            keep = pc.and_(keep, pc.fill_null(pc.equal(batch["split"], self.split), False))
        side = keep_side(batch["clip_id"].to_pylist(), side=self.holdout[0], fraction=self.holdout[1])
        if side is not None:
            keep = pc.and_(keep, pa.array(side))
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

    def with_seed(self, seed: int) -> CropBatch:
        """The same crops policy with another seed (another epoch's crops)."""
        other = copy.copy(self)
        other.seed = int(seed)
        return other


def count_short_segments(shard_dir: str | Path, *, crop_frames: int, min_frames: int | None = None) -> int:
    """How many segment rows `crop_dataset` skips for being shorter than `min_frames`."""
    min_frames = crop_frames // 2 if min_frames is None else min_frames
    frames = read_shard_table(shard_dir, columns=["num_frames"])["num_frames"].to_numpy()
    return int((frames < min_frames).sum())


class ShortSegmentsError(ValueError):
    """No segment of a shard set is long enough to give a crop."""


def check_segments_fit_crop(shard_dir: str | Path, *, crop_frames: int, min_frames: int | None = None) -> None:
    """Raise `ShortSegmentsError` when every segment is shorter than `min_frames` (default: half a
    crop), so `crop_dataset` would skip them all: checked before training starts, since the workers
    would otherwise wait for a first batch that never comes and fail minutes later."""
    min_frames = crop_frames // 2 if min_frames is None else min_frames
    frames = read_shard_table(shard_dir, columns=["num_frames"])["num_frames"].to_numpy()
    if len(frames) and int(frames.max()) >= min_frames:
        return
    found = (f"its {len(frames)} segments are {int(frames.min())} to {int(frames.max())} frames long "
             f"(median {int(np.median(frames))})") if len(frames) else "it holds no segments"
    raise ShortSegmentsError(
        f"no segment of {shard_dir} is long enough for a training crop: crops are {crop_frames} frames and a "
        f"segment needs at least {min_frames} (half a crop, the rest padded), but {found}. Pass a shorter "
        f"--crop-frames (at most {2 * int(frames.max()) + 1} frames here), or prepare longer audio "
        "(longer clips, or a larger prep --segment-s if the clips are longer than the segments)"
    )


def _crop_udf(manifest: dict, *, crop_frames: int, seed: int, normalize: bool, split: str | None,
              min_frames: int | None) -> CropBatch:
    per_clip = bool(normalize and manifest["preset"]["normalize_per_clip"])
    use_dataset_stats = normalize and not per_clip
    return CropBatch(
        crop_frames=crop_frames,
        min_frames=crop_frames // 2 if min_frames is None else min_frames,
        seed=seed,
        n_mels=int(manifest["n_mels"]),
        split=split,
        per_clip=per_clip,
        bin_mean=np.asarray(manifest["mean"], np.float32) if use_dataset_stats else None,
        bin_std=np.maximum(np.asarray(manifest["std"], np.float32), 1e-5) if use_dataset_stats else None,
    )


def pool_normaliser(manifest: dict):
    """float16 (frames, n_mels) -> float32 normalised exactly as the training crops are (RankMe pool)."""
    crop = _crop_udf(manifest, crop_frames=1, seed=0, normalize=True, split=None, min_frames=None)

    def normalise(mel16: np.ndarray) -> np.ndarray:
        mel = mel16.astype(np.float32)
        if crop.per_clip:
            return normalize_clip(mel)
        return (mel - crop.bin_mean) / crop.bin_std

    return normalise


def _checked_part_files(shard_dir: str | Path, manifest: dict, split: str | None, crop_frames: int):
    if crop_frames <= 0:
        raise ValueError(f"crop_frames must be positive, got {crop_frames}")
    location = locate_shards(shard_dir)
    files = [location.child_path(name) for name in checked_part_names(shard_dir, manifest)]
    if not files:
        raise ValueError(f"{shard_dir} has no rows to crop (num_rows={manifest.get('num_rows')})")
    if split is not None and split not in manifest.get("rows_by_split", {}):
        raise ValueError(
            f"{shard_dir} has no rows with split {split!r}; splits present: {sorted(manifest.get('rows_by_split', {}))}"
        )
    return location, files


class CropPartFiles:
    """map_batches UDF: rows {"path", "seed"} naming part files -> the crops of every segment in them.

    The pyarrow filesystem travels with the UDF, so every node opens the same bucket or folder."""

    def __init__(self, crop: CropBatch, *, filesystem, columns: list[str]):
        self.crop, self.filesystem, self.columns = crop, filesystem, columns

    def __call__(self, batch: pa.Table) -> dict[str, np.ndarray]:
        crops = [
            self.crop.with_seed(seed)(pq.read_table(path, columns=self.columns, filesystem=self.filesystem))["mel"]
            for path, seed in zip(batch["path"].to_pylist(), batch["seed"].to_pylist())
        ]
        return {"mel": np.concatenate(crops)}


def crop_dataset(shard_dir: str | Path, *, crop_frames: int, seed: int, normalize: bool = True,
                       split: str | None = None, min_frames: int | None = None, num_cpus_per_task: float = 0.5,
                       file_order_seed: int | None = None, epochs: int = 1,
                       holdout: tuple[str | None, float] = (None, 0.0)):
    """See the module docstring; fractional CPUs keep the reader from starving training workers.

    `holdout`: (side, fraction) of `pipeline.shards.holdout`; (None, 0.0) reads every clip.
    `file_order_seed`: read the part files in an order shuffled with this seed (None: sorted order).
    `epochs`: that many passes over the shards in one dataset; epoch e crops with `seed + e` and, when
    `file_order_seed` is given, reads the files in the order of `file_order_seed + e`.

    One read task per part file, listed here from the shard folder: prep wrote the parts, so there
    is nothing to discover. Ray Data's own Parquet reader lists the files' footers on an actor pool
    and bin-packs whole files into 128 MiB read units before the first row moves: 9-17 s before the
    first training batch of the default corpus, against ~1-7 s this way (README, performance notes).
    """
    import ray.data

    manifest = read_manifest(shard_dir)
    location, files = _checked_part_files(shard_dir, manifest, split, crop_frames)
    if epochs < 1:
        raise ValueError(f"epochs must be at least 1, got {epochs}")
    crop = _crop_udf(manifest, crop_frames=crop_frames, seed=seed, normalize=normalize, split=split, min_frames=min_frames)
    crop.holdout = holdout
    items = []
    for epoch in range(epochs):
        order = list(files)
        if file_order_seed is not None:
            random.Random(file_order_seed + epoch).shuffle(order)
        items += [{"path": path, "seed": seed + epoch} for path in order]
    columns = ["clip_id", "num_frames", "mel"] + (["split"] if split is not None else [])
    reader = CropPartFiles(crop, filesystem=location.filesystem, columns=columns)
    # One block per part file: the stream starts after the first file and memory stays per file.
    files_dataset = ray.data.from_items(items, override_num_blocks=len(items))
    return files_dataset.map_batches(reader, batch_format="pyarrow", batch_size=1, num_cpus=num_cpus_per_task)


def read_crops(shard_dir: str | Path, *, crop_frames: int, seed: int, limit: int, normalize: bool = True,
               min_frames: int | None = None, holdout: tuple[str | None, float] = (None, 0.0)) -> np.ndarray:
    """The first `limit` crops of `crop_dataset` (sorted file order, one epoch), read here with
    plain pyarrow: float32 (n, crop_frames, n_mels), n <= limit. For small fixed samples (RankMe's),
    where starting a Ray Data job would cost more than reading a file or two."""
    manifest = read_manifest(shard_dir)
    location, files = _checked_part_files(shard_dir, manifest, None, crop_frames)
    crop = _crop_udf(manifest, crop_frames=crop_frames, seed=seed, normalize=normalize, split=None, min_frames=min_frames)
    crop.holdout = holdout
    parts, count = [], 0
    for path in files:
        if count >= limit:
            break
        table = pq.read_table(path, columns=["clip_id", "num_frames", "mel"], filesystem=location.filesystem)
        parts.append(crop(table)["mel"][: limit - count])
        count += len(parts[-1])
    return np.concatenate(parts) if parts else np.zeros((0, crop_frames, int(manifest["n_mels"])), np.float32)
