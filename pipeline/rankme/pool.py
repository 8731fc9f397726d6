"""The RankMe pool: one fixed, seeded sample of pretraining-domain crops that every RankMe of a study uses.

Why a pool: RankMe grows with N and depends on the audio it embeds, so values only compare when they
were measured on the same clips with the same N. The RankMe study (Deng et al., Sec. III-C) samples
30,000 clips at random from the pretraining set (AudioSet unbalanced train), i.e. unlabeled audio of
the domain the model trains on; App. A shows 18,887 AudioSet-balanced clips give nearly the same
values. The pool is drawn the same way, from the pretraining shards (or `--rankme-shards`): as in the
paper, the sampled clips are training clips, not held out (App. A: "sampled data points from the
training dataset"); a user who wants held-out audio passes separate shards.

Selection, a pure function of (shards, crop length, N, seed), so any process re-derives the same pool:
rows in the order of a seeded hash of their clip id, each cut into non-overlapping crops of the
model's length (a last partial window of at least half a crop is padded, as the training reader
pads), taken until N crops. N defaults to the paper's 30,000 or every crop the shards hold when they
hold fewer. The fingerprint hashes the chosen (clip id, crops) list, the crop length and the seed.

`capped`: a value with N < MIN_SAMPLES_PER_FEATURE x K (K = embedding width) is marked so instead of
silently compared: RankMe <= min(N, K), and N near K compresses wide models' ranks (reference/evaluation.md).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from pipeline.shards.crops import pool_normaliser
from pipeline.shards.format import (
    checked_part_names,
    mel_matrices,
    read_manifest,
    read_shard_table,
)
from pipeline.shards.location import locate_shards

PAPER_RANKME_N = 30_000  # Deng et al., Sec. III-C and App. A: 30,000 randomly sampled clips
# Not from the paper: our floor for a comparable value. At N = 8 K an isotropic Gaussian's RankMe is
# within ~1% of its large-N value (reference/evaluation.md: K=768, N=8192 -> 759 of 765).
MIN_SAMPLES_PER_FEATURE = 8
# A pool of one crop has exactly one non-zero singular value, so its RankMe is 1 for any model:
# every command refuses a smaller pool than this.
MIN_POOL_CROPS = 2
POOL_SEED = 1_000_003  # fixed, independent of every training seed: all trials share the pool
# Crops held at once while a pool is embedded (as mel crops here, as audio in
# pipeline.rankme.waveform_pool's readers): 64 x 10 s x 32 kHz float32 audio is 82 MB.
POOL_BATCH_CROPS = 64


@dataclass(frozen=True, kw_only=True)
class RankMePool:
    """Which crops RankMe embeds: `rows` = ((clip_id, crops taken from it), ...) in pool order."""

    shards_dir: str
    crop_frames: int
    seed: int
    rows: tuple[tuple[str, int], ...]
    fingerprint: str

    @property
    def n(self) -> int:
        return sum(count for _, count in self.rows)

    def clip_ids(self) -> set[str]:
        return {clip_id for clip_id, _ in self.rows}


def is_capped(n_samples: int, n_features: int) -> bool:
    """True when N is below MIN_SAMPLES_PER_FEATURE x K: the value is limited by N, flag it."""
    return n_samples < MIN_SAMPLES_PER_FEATURE * n_features


def crops_in_row(num_frames: int, crop_frames: int) -> int:
    """Non-overlapping crops of one row: whole windows plus a last one at least half a crop long."""
    whole, rest = divmod(int(num_frames), crop_frames)
    return whole + (1 if rest and rest >= crop_frames // 2 else 0)


def _hash_order(clip_id: str, seed: int) -> bytes:
    return hashlib.blake2b(f"{seed}:{clip_id}".encode(), digest_size=8).digest()


def select_pool(shards_dir: str | Path, *, crop_frames: int, n: int | None = None, seed: int = POOL_SEED) -> RankMePool:
    """The pool of `n` crops (None: PAPER_RANKME_N, or all the shards hold when fewer); see the module doc."""
    if crop_frames <= 0:
        raise ValueError(f"crop_frames must be positive, got {crop_frames}")
    if n is not None and n < 1:
        raise ValueError(f"--rankme-n must be at least 1, got {n}")
    table = read_shard_table(shards_dir, columns=["clip_id", "num_frames"])
    counts = {
        clip_id: crops_in_row(frames, crop_frames)
        for clip_id, frames in zip(table["clip_id"].to_pylist(), table["num_frames"].to_pylist())
    }
    available = sum(counts.values())
    wanted = min(PAPER_RANKME_N, available) if n is None else n
    if wanted > available or available == 0:
        raise ValueError(
            f"--rankme-n {wanted} asks for more RankMe crops than {shards_dir} holds ({available} crops of "
            f"{crop_frames} frames); pass a smaller --rankme-n or --rankme-shards with more audio"
        )
    rows, taken = [], 0
    for clip_id in sorted((c for c, k in counts.items() if k), key=lambda c: _hash_order(c, seed)):
        take = min(counts[clip_id], wanted - taken)
        rows.append((clip_id, take))
        taken += take
        if taken == wanted:
            break
    identity = json.dumps({"rows": rows, "crop_frames": crop_frames, "seed": seed}, separators=(",", ":"))
    return RankMePool(
        shards_dir=str(shards_dir),
        crop_frames=crop_frames,
        seed=seed,
        rows=tuple(map(tuple, rows)),
        fingerprint=hashlib.sha256(identity.encode()).hexdigest()[:16],
    )


def iter_pool_crops(pool: RankMePool, *, batch_crops: int = POOL_BATCH_CROPS) -> Iterator[np.ndarray]:
    """The pool's crops, float32 (<= batch_crops, crop_frames, n_mels), normalised as training reads them.

    Read from the part files at each call (one pass, one file in memory at a time) rather than kept:
    30,000 crops of 10 s are ~7 GiB of float32. Order is file order; RankMe does not depend on it."""
    manifest = read_manifest(pool.shards_dir)
    normalise, silence = pool_normaliser(manifest), _silence_rule(manifest)
    wanted = dict(pool.rows)
    location = locate_shards(pool.shards_dir)
    pending: list[np.ndarray] = []
    for name in checked_part_names(pool.shards_dir, manifest):
        table = pq.read_table(location.child_path(name), columns=["clip_id", "mel"], filesystem=location.filesystem)
        table = table.filter(pc.is_in(table["clip_id"], value_set=pa.array(list(wanted), table["clip_id"].type)))
        for clip_id, mel16 in zip(table["clip_id"].to_pylist(), mel_matrices(table["mel"], int(manifest["n_mels"]))):
            normalised = normalise(mel16)
            pending.extend(_windows(normalised, pool.crop_frames, wanted[clip_id], silence(mel16, normalised)))
            while len(pending) >= batch_crops:
                yield np.stack(pending[:batch_crops])
                pending = pending[batch_crops:]
    if pending:
        yield np.stack(pending)


def _silence_rule(manifest: dict):
    """(stored row, normalised row) -> the normalised value that pads it, as the training crops pad:
    the row's minimum for a log-mel; for a waveform a zero sample, normalised like the row."""
    if manifest["preset"].get("kind") != "waveform":
        return lambda stored, normalised: float(normalised.min())

    def zero_sample(stored: np.ndarray, normalised: np.ndarray) -> float:
        # the per-clip normalisation is affine, n = (x - mean) / std: a zero sample maps to -mean / std
        values = stored.astype(np.float32)
        std = float(values.std())
        return -float(values.mean()) / (std if std > 1e-5 else 1.0)

    return zero_sample


def _windows(mel: np.ndarray, crop_frames: int, count: int, pad_value: float) -> list[np.ndarray]:
    """The first `count` non-overlapping windows; a short last one padded with `pad_value` (silence)."""
    windows = []
    for index in range(count):
        window = mel[index * crop_frames : (index + 1) * crop_frames]
        if len(window) < crop_frames:
            padding = np.full((crop_frames - len(window), mel.shape[1]), pad_value, dtype=mel.dtype)
            window = np.concatenate([window, padding])
        windows.append(window)
    return windows
