"""Evaluation's RankMe: the checkpoint's RankMe pool (the one its training measured on), not the task audio.

The pool is re-derived from what the checkpoint recorded (`pretrain_config`: `rankme_shards_dir` or
`shards_dir`, `crop_frames`, `rankme_n`), so a trial's training values and its evaluation value share
the pool fingerprint and N; `--rankme-shards` / `--rankme-n` override them. A checkpoint that names no
shards (one saved outside `python -m pipeline.pretrain`) and no override gets NaN with a warning.
"""

from __future__ import annotations

import math
import warnings

from pipeline.evaluate.embeddings import FrameEmbedder
from pipeline.rankme.model_rankme import PoolRankMe, measure_pool_rankme, recorded_training_rankme
from pipeline.rankme.pool import select_pool


def checkpoint_pool_rankme(
    embedder: FrameEmbedder, meta: dict, *, rankme_shards: str | None = None, rankme_n: int | None = None
) -> PoolRankMe:
    """RankMe of the frozen model on its pool (see the module doc)."""
    recorded = meta.get("pretrain_config") or {}
    shards = rankme_shards or recorded.get("rankme_shards_dir") or recorded.get("shards_dir")
    if not shards:
        warnings.warn(
            "the checkpoint names no training shards, so RankMe has no pool to measure on (recorded as NaN); "
            "pass --rankme-shards DIR (the study's pretraining shards) to measure it",
            stacklevel=3,
        )
        return PoolRankMe(value=math.nan, n=0, k=embedder.embedding_size, pool="", capped=True)
    crop_frames = int(recorded.get("crop_frames") or embedder.spec.crop_frames)
    pool = select_pool(shards, crop_frames=crop_frames, n=rankme_n or recorded.get("rankme_n"))
    measured_in_training = recorded_training_rankme(meta, pool=pool.fingerprint, readout=meta.get("readout_stats", ""))
    if measured_in_training is not None:
        return measured_in_training
    return measure_pool_rankme(embedder.model, pool, device=embedder.device)
