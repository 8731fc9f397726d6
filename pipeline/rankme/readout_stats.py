"""The readout's running statistics: re-estimated on one fixed sample of pretraining crops before a
model is read out, so that every checkpoint, the initialisation and every baseline of a study are
normalised the same way.

Why: the study MAE's input BatchNorm (Dasheng's `init_bn`, momentum 0.01) is read out in eval mode
with running statistics that training moves. Left as trained, step 0 is read out with mean 0 and
variance 1 and a later checkpoint with an average of its last few hundred crop batches: with no
weight changed (peak lr 0), Q moved by up to 0.03 between the two, as much as the effects a CPU
study judges (docs/cpu-default-research.md). Re-estimated here, two models with equal weights read
out equally at any step.

The calibration set is the first CALIBRATION_CROPS crops of the RankMe pool's selection (the same
seeded order over the same pretraining shards, `pipeline.rankme.pool.select_pool`), or every crop
when the shards hold fewer: a pure function of (shards, crop length), so the driver, every task
worker and every later process re-derive the same crops. It is pretraining-domain audio cut and
padded as training cuts it, i.e. the population the running statistics were tracking.

Neither the RankMe study nor Dasheng's code re-estimates statistics: both read out with the
running statistics after training, which after thousands of steps at momentum 0.01 are close to the
crop stream's population statistics that this estimates (docs/fidelity.md).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch
from torch import nn

from models.running_stats import has_running_stats, kept_running_stats, reestimate_running_stats
from pipeline.rankme.pool import POOL_BATCH_CROPS, RankMePool, iter_pool_crops, select_pool

# Not from a paper: 1,024 crops of the CPU default (200 frames each) are ~200,000 frames per mel bin,
# at about a third of the cost of the pool's RankMe there. The set is fixed, so its size moves every
# readout of a study alike; measured by `benchmarks/readout_stats.py --calibration-sizes` on one
# initialisation, 256 and 4,096 crops give Q 0.5872 and 0.5849 (0.3 paired SE apart) and R 44.9 and
# 43.2 (docs/cpu-default-research.md).
CALIBRATION_CROPS = 1024


def calibration_pool(shards_dir: str, *, crop_frames: int) -> RankMePool:
    """The calibration crops of a shard set: the pool selection's first CALIBRATION_CROPS (all when fewer)."""
    everything = select_pool(shards_dir, crop_frames=crop_frames)
    if everything.n <= CALIBRATION_CROPS:
        return everything
    return select_pool(shards_dir, crop_frames=crop_frames, n=CALIBRATION_CROPS)


def calibrate_for_readout(model: nn.Module, pool: RankMePool, *, device: torch.device | str) -> int:
    """Re-estimates the model's running statistics on the pool's crops, through its readout
    (`model.embed`), in place; returns the batches read (0: the model has no such layer)."""
    if not has_running_stats(model):
        return 0
    batches = (torch.from_numpy(crops).to(device) for crops in iter_pool_crops(pool, batch_crops=POOL_BATCH_CROPS))
    return reestimate_running_stats(model, batches, model.embed)


@contextlib.contextmanager
def calibrated_readout(model: nn.Module, pool: RankMePool | None, *, device: torch.device | str) -> Iterator[None]:
    """Inside the block the model reads out with statistics re-estimated on `pool`; after it, the
    statistics training was tracking are back (training goes on from them). `pool` None: as it is."""
    if pool is None or not has_running_stats(model):
        yield
        return
    with kept_running_stats(model):
        calibrate_for_readout(model, pool, device=device)
        yield
