"""Training crops: segment rows of a shard directory (local path or URI) -> fixed-size normalised log-mel crops.

Policies (the stream `pipeline.shards.crop_stream` and the fixed samples `read_crops` share them):
- One crop per segment row per epoch; its start is a hash of (`seed`, clip id) (`crop_starts`), so the
  same seed gives the same crops on any machine and in any row order; each epoch crops with its own seed.
- Normalisation (`normalize=True`) follows the preset recorded in the manifest: presets with
  `normalize_per_clip` (audiomae) standardise each segment by its own mean/std
  (`frontend.normalize_clip`, over the whole segment, before cropping); the others (dasheng) use
  the manifest's per-bin dataset mean/std.
- Segments shorter than `crop_frames` but at least `min_frames` long (default: half a crop) are
  padded at the end with silence: for a log-mel the segment's minimum value, i.e. its quietest level,
  which after log compression is what silence looks like; for a waveform a zero sample. Shorter segments are skipped; they are counted in
  `count_short_segments` so a caller can report how much data the threshold drops.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from pipeline.audio.frontend import normalize_clip
from pipeline.shards.format import (
    checked_part_names,
    flat_mels,
    read_manifest,
    read_shard_table,
)
from pipeline.shards.holdout import keep_side
from pipeline.shards.location import locate_shards


def clip_keys(clip_ids: Sequence[str]) -> np.ndarray:
    """uint64 (n,): a stable 64-bit key per clip id (blake2b), the crop position's per-clip input."""
    return np.fromiter(
        (int.from_bytes(hashlib.blake2b(clip_id.encode(), digest_size=8).digest(), "little") for clip_id in clip_ids),
        dtype=np.uint64, count=len(clip_ids),
    )  # fmt: skip


def _mix64(values: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser, elementwise: well-spread 64-bit outputs from nearby inputs."""
    with np.errstate(over="ignore"):
        values = (values ^ (values >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        values = (values ^ (values >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return values ^ (values >> np.uint64(31))


def crop_starts(keys: np.ndarray, num_frames: np.ndarray, crop_frames: int, seed: int) -> np.ndarray:
    """int64 (n,): each row's crop start, uniform over 0..num_frames - crop_frames (0 for a short row),
    a pure function of (seed, clip key): the same crops on any machine, in any order, vectorised."""
    spans = np.maximum(np.asarray(num_frames, np.int64) - crop_frames + 1, 1).astype(np.uint64)
    seeded = _mix64(np.asarray(keys, np.uint64) ^ _mix64(np.full(len(keys), seed % 2**64, np.uint64)))
    return (seeded % spans).astype(np.int64)  # bias < span / 2**64: none measurable


def crop_or_pad(mel: np.ndarray, crop_frames: int, rng: np.random.Generator) -> np.ndarray:
    """A random window of `crop_frames` frames; shorter input is padded at the end with its minimum."""
    num_frames = len(mel)
    if num_frames >= crop_frames:
        start = int(rng.integers(0, num_frames - crop_frames + 1))
        return mel[start : start + crop_frames]
    padding = np.full((crop_frames - num_frames, mel.shape[1]), mel.min(), dtype=mel.dtype)
    return np.concatenate([mel, padding])


@dataclasses.dataclass(frozen=True)
class RawCrops:
    """Crops as stored (float16) and what makes them training crops: normalised = (mel - shift) / scale,
    then frames from `valid` on set to `pad`. The reader moves these, half the bytes of float32 crops,
    and the normalisation runs once where the batch lands (`pipeline.pretrain.data`): on a GPU, on it."""

    mel: np.ndarray  # float16 (n, crop_frames, n_mels)
    shift: np.ndarray  # float32 (n, n_mels)
    scale: np.ndarray  # float32 (n, n_mels)
    valid: np.ndarray  # int64 (n,): the crop's frames that hold the segment; the rest is padding
    pad: np.ndarray  # float32 (n,): the padding's normalised value (the segment's minimum)

    def __len__(self) -> int:
        return len(self.mel)

    def normalised(self) -> np.ndarray:
        """float32 (n, crop_frames, n_mels)."""
        crops = self.mel.astype(np.float32)
        crops -= self.shift[:, None, :]
        crops /= self.scale[:, None, :]
        padding = np.arange(crops.shape[1])[None, :] >= self.valid[:, None]
        if padding.any():
            crops[padding] = np.broadcast_to(self.pad[:, None], padding.shape)[padding][:, None]
        return crops

    def take(self, index) -> RawCrops:
        return RawCrops(*(getattr(self, field.name)[index] for field in dataclasses.fields(self)))

    @staticmethod
    def concatenate(parts: Sequence[RawCrops]) -> RawCrops:
        if len(parts) == 1:
            return parts[0]
        return RawCrops(*(np.concatenate([getattr(part, field.name) for part in parts])
                          for field in dataclasses.fields(RawCrops)))  # fmt: skip


class CropBatch:
    """A pyarrow table of segment rows -> {"mel": float32 (kept rows, crop_frames, n_mels)}, kept rows in
    table order. Vectorised: the per-row Python is one hash of the clip id (docs/performance.md, the reader budget)."""

    def __init__(
        self,
        *,
        crop_frames: int,
        min_frames: int,
        seed: int,
        n_mels: int,
        split: str | None,
        per_clip: bool,
        bin_mean: np.ndarray | None,
        bin_std: np.ndarray | None,
        waveform: bool = False,
    ):
        self.crop_frames, self.min_frames, self.seed, self.n_mels = crop_frames, min_frames, seed, n_mels
        self.split, self.per_clip, self.bin_mean, self.bin_std = split, per_clip, bin_mean, bin_std
        self.waveform = waveform  # frames of samples (the `waveform` preset): silence is a zero sample
        self.holdout: tuple[str | None, float] = (None, 0.0)  # (side, fraction): pipeline.shards.holdout

    def columns(self) -> list[str]:
        """The columns `__call__` reads."""
        return (
            ["clip_id", "num_frames", "mel"]
            + (["mel_bin_sum", "mel_bin_sq_sum"] if self.per_clip else [])
            + (["split"] if self.split is not None else [])
        )

    def kept_rows(self, table: pa.Table) -> np.ndarray:
        """bool (rows,): long enough, of the split, on the holdout side."""
        keep = table["num_frames"].to_numpy() >= self.min_frames
        if self.split is not None:
            keep &= pc.fill_null(pc.equal(table["split"], self.split), False).to_numpy(zero_copy_only=False)
        side = keep_side(table["clip_id"].to_pylist(), side=self.holdout[0], fraction=self.holdout[1])
        return keep if side is None else keep & side

    def __call__(self, table: pa.Table) -> dict[str, np.ndarray]:
        return {"mel": self.crop(table.filter(pa.array(self.kept_rows(table))))}

    def crop(self, table: pa.Table) -> np.ndarray:
        """float32 (rows, crop_frames, n_mels): one normalised crop of every row of `table`."""
        return self.crop_raw(table).normalised()

    def crop_raw(self, table: pa.Table) -> RawCrops:
        """The crops of every row of `table` as stored (float16), with what normalises and pads them."""
        frames = table["num_frames"].to_numpy().astype(np.int64)
        flat, offsets = flat_mels(table["mel"], self.n_mels)
        starts = crop_starts(clip_keys(table["clip_id"].to_pylist()), frames, self.crop_frames, self.seed)
        positions = (offsets[:-1] + starts)[:, None] + np.arange(self.crop_frames)
        # A short row's positions stop at its last frame; `valid` marks where its padding starts.
        mel = flat[np.minimum(positions, offsets[1:, None] - 1)]
        shift, scale = self._normalisation(table, frames)
        shift = np.broadcast_to(shift, (len(frames), self.n_mels)).astype(np.float32)
        scale = np.broadcast_to(scale, (len(frames), self.n_mels)).astype(np.float32)
        pad = np.zeros(len(frames), np.float32)
        for row in np.flatnonzero(frames < self.crop_frames):  # pad with the segment's silence
            if self.waveform:
                pad[row] = -shift[row, 0] / scale[row, 0]  # a zero sample, normalised like the segment
                continue
            segment = flat[offsets[row] : offsets[row + 1]].astype(np.float32)
            pad[row] = ((segment - shift[row]) / scale[row]).min()
        return RawCrops(mel=mel, shift=shift, scale=scale, valid=np.minimum(frames, self.crop_frames), pad=pad)

    def _normalisation(self, table: pa.Table, frames: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(shift, scale) with normalised = (mel - shift) / scale, broadcastable to (rows, n_mels)."""
        if self.per_clip:
            # frontend.normalize_clip over the whole segment, from prep's float64 per-bin sums of the
            # stored values: no pass over the frames outside the crop.
            count = np.maximum(frames * self.n_mels, 1).astype(np.float64)
            bin_sum = table["mel_bin_sum"].combine_chunks().flatten().to_numpy().reshape(-1, self.n_mels)
            bin_sq_sum = table["mel_bin_sq_sum"].combine_chunks().flatten().to_numpy().reshape(-1, self.n_mels)
            mean = bin_sum.sum(axis=1) / count
            std = np.sqrt(np.maximum(bin_sq_sum.sum(axis=1) / count - mean**2, 0.0))
            std = np.where(std > 1e-5, std, 1.0)  # a constant segment (digital silence) is only centred
            return mean.astype(np.float32)[:, None], std.astype(np.float32)[:, None]
        if self.bin_mean is not None:
            return self.bin_mean, self.bin_std
        return np.float32(0.0), np.float32(1.0)

    def with_seed(self, seed: int) -> CropBatch:
        """The same crops policy with another seed (another epoch's crops)."""
        other = copy.copy(self)
        other.seed = int(seed)
        return other


def count_short_segments(shard_dir: str | Path, *, crop_frames: int, min_frames: int | None = None) -> int:
    """How many segment rows the training crops skip for being shorter than `min_frames`."""
    min_frames = crop_frames // 2 if min_frames is None else min_frames
    frames = read_shard_table(shard_dir, columns=["num_frames"])["num_frames"].to_numpy()
    return int((frames < min_frames).sum())


class ShortSegmentsError(ValueError):
    """No segment of a shard set is long enough to give a crop."""


def check_segments_fit_crop(shard_dir: str | Path, *, crop_frames: int, min_frames: int | None = None) -> None:
    """Raise `ShortSegmentsError` when every segment is shorter than `min_frames` (default: half a
    crop), so the training stream would skip them all: checked before training starts, since the workers
    would otherwise wait for a first batch that never comes and fail minutes later."""
    min_frames = crop_frames // 2 if min_frames is None else min_frames
    frames = read_shard_table(shard_dir, columns=["num_frames"])["num_frames"].to_numpy()
    if len(frames) and int(frames.max()) >= min_frames:
        return
    found = (
        (
            f"its {len(frames)} segments are {int(frames.min())} to {int(frames.max())} frames long "
            f"(median {int(np.median(frames))})"
        )
        if len(frames)
        else "it holds no segments"
    )
    raise ShortSegmentsError(
        f"no segment of {shard_dir} is long enough for a training crop: crops are {crop_frames} frames and a "
        f"segment needs at least {min_frames} (half a crop, the rest padded), but {found}. Pass a shorter "
        f"--crop-frames (at most {2 * int(frames.max()) + 1} frames here), or prepare longer audio "
        "(longer clips, or a larger prep --segment-s if the clips are longer than the segments)"
    )


def crop_policy(
    manifest: dict,
    *,
    crop_frames: int,
    seed: int,
    normalize: bool = True,
    split: str | None = None,
    min_frames: int | None = None,
) -> CropBatch:
    """The crops policy of a shard set (its manifest): normalisation, minimum length, seed."""
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
        waveform=manifest["preset"].get("kind") == "waveform",
    )


def pool_normaliser(manifest: dict):
    """float16 (frames, n_mels) -> float32 normalised exactly as the training crops are (RankMe pool)."""
    crop = crop_policy(manifest, crop_frames=1, seed=0, normalize=True, split=None, min_frames=None)

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


def read_crops(
    shard_dir: str | Path,
    *,
    crop_frames: int,
    seed: int,
    limit: int,
    normalize: bool = True,
    min_frames: int | None = None,
    holdout: tuple[str | None, float] = (None, 0.0),
) -> np.ndarray:
    """The first `limit` crops in sorted file order (one epoch, no shuffle): float32 (n, crop_frames,
    n_mels), n <= limit. For small fixed samples (the validation crops)."""
    manifest = read_manifest(shard_dir)
    location, files = _checked_part_files(shard_dir, manifest, None, crop_frames)
    crop = crop_policy(
        manifest, crop_frames=crop_frames, seed=seed, normalize=normalize, split=None, min_frames=min_frames
    )
    crop.holdout = holdout
    parts, count = [], 0
    for path in files:
        if count >= limit:
            break
        table = pq.read_table(path, columns=crop.columns(), filesystem=location.filesystem)
        parts.append(crop(table)["mel"][: limit - count])
        count += len(parts[-1])
    return np.concatenate(parts) if parts else np.zeros((0, crop_frames, int(manifest["n_mels"])), np.float32)
