"""A loaded checkpoint's running statistics, re-estimated on its study's calibration crops before it
is read out (pipeline.rankme.readout_stats says why and which crops).

The crops come from the shards the checkpoint's RankMe pool is drawn from (`--rankme-shards` when
given, else the recorded `rankme_shards_dir` or `shards_dir`), so every checkpoint of a study, its
step 0 included, and the study's baselines share one calibration set. `readout_stats`:
- "calibrated" (the default): re-estimated as above;
- "recorded": the statistics the checkpoint was saved with, the readout before re-estimation
  existed (kept to measure what re-estimation changes: `benchmarks/readout_stats.py`).
A model without running-statistics layers reads out the same under both.
"""

from __future__ import annotations

import dataclasses
import warnings

import torch
from torch import nn

from models.running_stats import has_running_stats
from pipeline.rankme.readout_stats import calibrate_for_readout, calibration_pool

READOUT_STATS = ("calibrated", "recorded")
DEFAULT_READOUT_STATS = "calibrated"


@dataclasses.dataclass(frozen=True)
class Readout:
    """How a checkpoint was read out: what a Q or an R must record to be compared with another."""

    stats: str  # "calibrated", "recorded" or "none" (a model without running statistics)
    calibration_pool: str = ""  # the calibration crops' fingerprint (pipeline.rankme.pool) when calibrated
    calibration_crops: int = 0

    def record(self) -> dict[str, str | int]:
        return {
            "readout_stats": self.stats,
            "readout_calibration_pool": self.calibration_pool,
            "readout_calibration_crops": self.calibration_crops,
        }


def check_readout_stats(readout_stats: str) -> None:
    if readout_stats not in READOUT_STATS:
        raise ValueError(f"readout_stats must be one of {READOUT_STATS}, got {readout_stats!r}")


def calibration_shards_of(meta: dict, rankme_shards: str | None = None) -> str | None:
    """The shards a checkpoint's readout calibrates on: those its RankMe pool is drawn from."""
    recorded = meta.get("pretrain_config") or {}
    return rankme_shards or recorded.get("rankme_shards_dir") or recorded.get("shards_dir") or None


def calibrate_checkpoint(
    model: nn.Module,
    meta: dict,
    *,
    device: torch.device | str,
    readout_stats: str = DEFAULT_READOUT_STATS,
    rankme_shards: str | None = None,
) -> Readout:
    """Prepares a loaded checkpoint's model for readout; returns the readout it got ("calibrated" with
    its calibration set, "recorded", or "none" for a model without running statistics)."""
    check_readout_stats(readout_stats)
    if not has_running_stats(model):
        return Readout("none")
    if readout_stats == "recorded":
        return Readout("recorded")
    shards = calibration_shards_of(meta, rankme_shards)
    if shards is None:
        warnings.warn(
            "the checkpoint names no training shards, so its running statistics cannot be re-estimated and it is "
            "read out with the ones it was saved with (not comparable with calibrated readouts); pass "
            "--rankme-shards DIR (the study's pretraining shards)",
            stacklevel=2,
        )
        return Readout("recorded")
    crop_frames = int((meta.get("pretrain_config") or {}).get("crop_frames") or model.spec.crop_frames)
    pool = calibration_pool(shards, crop_frames=crop_frames)
    calibrate_for_readout(model, pool, device=device)
    return Readout("calibrated", calibration_pool=pool.fingerprint, calibration_crops=pool.n)
