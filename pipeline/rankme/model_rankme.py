"""RankMe of a model on the RankMe pool (`pipeline.rankme.pool`), measured one way everywhere.

Training (rank 0, at its schedule) and evaluation both call `measure_pool_rankme`: scene embeddings
(the model's frame features averaged over time) of the pool's crops, then RankMe. Each value travels
with what makes it comparable: N, K, the pool's fingerprint, and whether N < 8 K capped it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from pipeline.rankme.effective_rank import rankme_with_shape
from pipeline.rankme.pool import POOL_BATCH_CROPS, RankMePool, is_capped, iter_pool_crops
from pipeline.tracking.keys import RANKME_CAPPED_KEY, RANKME_K_KEY, RANKME_N_KEY, RANKME_POOL_KEY

# Decimals R is logged with (training's `rankme` metric, a study's points): what its spread supports.
# R varies by about 1 from seed to seed (the default study's last-step R spans 50.2-51.8), so 2
# decimals keep a guard digit; the MLflow UI shows what is stored, and it showed 50.8948466806.
RANKME_DECIMALS = 2


def logged_rankme(value: float) -> float:
    """R as a metric is logged: rounded to RANKME_DECIMALS (NaN and inf as they are)."""
    return round(float(value), RANKME_DECIMALS) if math.isfinite(value) else float(value)


@dataclass(frozen=True, kw_only=True)
class PoolRankMe:
    value: float
    n: int
    k: int
    pool: str  # the pool's fingerprint
    capped: bool  # N < MIN_SAMPLES_PER_FEATURE x K: limited by N, not comparable to uncapped values

    @classmethod
    def of_embeddings(cls, scene: np.ndarray | torch.Tensor, *, pool: str) -> PoolRankMe:
        """RankMe of one scene embedding per pool crop, (crops, dim), with its N, K and cap;
        `pool` is the pool's fingerprint. Every measurement on a pool (a checkpoint, a HEAR module)
        comes out of here, so the record's fields are filled one way."""
        value = rankme_with_shape(scene)
        return cls(
            value=value.value,
            n=value.n_samples,
            k=value.n_features,
            pool=pool,
            capped=is_capped(value.n_samples, value.n_features),
        )

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
    return PoolRankMe.of_embeddings(torch.cat(scene), pool=pool.fingerprint)


# A checkpoint's model.json carries the R its training measured at that very step, with what makes the
# value reproducible: evaluation takes it instead of measuring the same pool with the same readout again
# (a study trial scores every checkpoint; the measurement was ~20% of its evaluation time).
TRAINING_RANKME_KEY = "training_rankme"


def training_rankme_meta(value: PoolRankMe, *, step: int, readout: str) -> dict[str, object]:
    """The checkpoint-metadata entry for `value`, measured at `step` with `readout` ("calibrated",
    "recorded" or "none": pipeline.evaluate.readout_calibration's names)."""
    return {"step": int(step), "readout": readout, "value": value.value, "n": value.n, "k": value.k,
            "pool": value.pool, "capped": value.capped}  # fmt: skip


def recorded_training_rankme(meta: dict, *, pool: str, readout: str) -> PoolRankMe | None:
    """The R a checkpoint's training recorded, when it was measured at the checkpoint's own step, on the
    pool with fingerprint `pool` and with `readout`: the measurement evaluation would repeat. Else None."""
    record = meta.get(TRAINING_RANKME_KEY)
    if not isinstance(record, dict):
        return None
    same = record.get("step") == meta.get("step") and record.get("pool") == pool and record.get("readout") == readout
    if not same or not pool:
        return None
    return PoolRankMe(
        value=float(record["value"]), n=int(record["n"]), k=int(record["k"]), pool=str(record["pool"]),
        capped=bool(record["capped"]),
    )  # fmt: skip
