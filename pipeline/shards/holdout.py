"""The validation holdout: a seeded share of a shard set's clips kept out of training.

A clip is held out when a hash of (HOLDOUT_SALT, clip id) falls below `fraction`: the same clips on
every machine, in any block order, and every segment of a clip on the same side. Pretraining's
validation MSE (`pipeline.pretrain.validation`) reads the held-out side, training the rest. Not the
RankMe pool: that is a separate sample of its own.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import numpy as np

HOLDOUT_SALT = b"audioscale-validation-holdout"
HOLDOUT_SIDES = ("train", "validation")  # the rows a reader keeps


def held_out(clip_ids: Sequence[str], fraction: float) -> np.ndarray:
    """bool (n,): True for the clips in the validation holdout of `fraction`."""
    if fraction <= 0.0:
        return np.zeros(len(clip_ids), dtype=bool)
    keys = [
        int.from_bytes(hashlib.blake2b(clip_id.encode(), digest_size=8, key=HOLDOUT_SALT).digest(), "little")
        for clip_id in clip_ids
    ]
    return np.asarray(keys, dtype=np.float64) / 2.0**64 < fraction


def keep_side(clip_ids: Sequence[str], *, side: str | None, fraction: float) -> np.ndarray | None:
    """bool (n,) rows a reader of `side` keeps; None when it keeps them all (no holdout)."""
    if side is None or fraction <= 0.0:
        return None
    if side not in HOLDOUT_SIDES:
        raise ValueError(f"holdout side {side!r}: use one of {HOLDOUT_SIDES}")
    mask = held_out(clip_ids, fraction)
    return mask if side == "validation" else ~mask
