"""RankMe of a model on the RankMe pool (`pipeline.rankme.pool`), measured one way everywhere.

Training (rank 0, at its schedule) and evaluation both call `measure_pool_rankme`: scene embeddings
(the model's frame features averaged over time) of the pool's crops, then RankMe. Each value travels
with what makes it comparable: N, K, the pool's fingerprint, and whether N < 8 K capped it.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from pipeline.rankme.effective_rank import rankme_with_shape
from pipeline.rankme.pool import POOL_BATCH_CROPS, RankMePool, is_capped, iter_pool_crops
from pipeline.tracking.keys import RANKME_CAPPED_KEY, RANKME_K_KEY, RANKME_N_KEY, RANKME_POOL_KEY


@dataclass(frozen=True, kw_only=True)
class PoolRankMe:
    value: float
    n: int
    k: int
    pool: str  # the pool's fingerprint
    capped: bool  # N < MIN_SAMPLES_PER_FEATURE x K: limited by N, not comparable to uncapped values

    def record(self) -> dict[str, object]:
        """What is logged beside every value: MLflow params/tags and report columns use these names."""
        return {RANKME_N_KEY: self.n, RANKME_K_KEY: self.k, RANKME_POOL_KEY: self.pool, RANKME_CAPPED_KEY: self.capped}


@torch.no_grad()
def measure_pool_rankme(model: nn.Module, pool: RankMePool, *, device: torch.device | str) -> PoolRankMe:
    """RankMe of the scene embeddings of every pool crop (model in eval mode, restored after)."""
    was_training = model.training
    model.eval()
    scene = []
    for crops in iter_pool_crops(pool, batch_crops=POOL_BATCH_CROPS):
        frames = model.embed(torch.from_numpy(crops).to(device))  # (crops, frames, dim)
        scene.append(frames.float().mean(dim=1))  # (crops, dim)
    model.train(was_training)
    # On a GPU the embeddings stay there: RankMe's float64 Gram and eigensolver run on the device.
    value = rankme_with_shape(torch.cat(scene))
    return PoolRankMe(
        value=value.value,
        n=value.n_samples,
        k=value.n_features,
        pool=pool.fingerprint,
        capped=is_capped(value.n_samples, value.n_features),
    )
