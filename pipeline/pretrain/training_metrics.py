"""What a worker measures about its own training, in plain PyTorch (no Ray): throughput over a
window of steps, and RankMe on the study's RankMe pool at its schedule (rank 0 only).
"""

from __future__ import annotations

import math
import time

import numpy as np
import torch
from torch import nn

from models.running_stats import has_running_stats
from pipeline.rankme.model_rankme import (
    TRAINING_RANKME_KEY,
    PoolRankMe,
    measure_pool_rankme,
    training_rankme_meta,
)
from pipeline.rankme.pool import RankMePool
from pipeline.rankme.readout_stats import calibrated_readout


class RankMeSchedule:
    """RankMe on the pool every `every_steps` steps (0: none), at each of `steps` (Table III's in the
    study) and at the last; `latest` is the newest value and `latest_record` its N, K, pool
    fingerprint and capped flag. `pool` None (RankMe off, or not rank 0) measures nothing; `is_due`
    answers the same on every rank."""

    def __init__(
        self,
        pool: RankMePool | None,
        *,
        every_steps: int,
        last_step: int,
        device: torch.device,
        steps: tuple[int, ...] = (),
        calibration: RankMePool | None = None,
    ) -> None:
        self.pool, self.every_steps, self.last_step, self.device = pool, every_steps, last_step, device
        # The readout's calibration crops: R is measured with running statistics re-estimated on them,
        # as evaluation measures it, and training goes on from its own (pipeline.rankme.readout_stats).
        self.calibration = calibration
        self.steps = frozenset(steps)
        self.latest: float | None = None
        self.latest_record: PoolRankMe | None = None
        self.latest_step: int | None = None
        self.latest_readout = "none"  # as pipeline.evaluate.readout_calibration names a readout

    def is_due(self, step: int) -> bool:
        if not (self.every_steps > 0 or self.steps):
            return False
        return (
            step in (0, self.last_step) or step in self.steps or (self.every_steps > 0 and step % self.every_steps == 0)
        )

    def measure_if_due(self, model: nn.Module, step: int) -> float | None:
        """The new value when `step` is a RankMe step (step 0: before training), else None."""
        if self.pool is None or not self.is_due(step):
            return None
        with calibrated_readout(model, self.calibration, device=self.device):
            self.latest_record = measure_pool_rankme(model, self.pool, device=self.device)
        self.latest, self.latest_step = self.latest_record.value, step
        if has_running_stats(model):
            self.latest_readout = "calibrated" if self.calibration is not None else "recorded"
        return self.latest

    def checkpoint_meta(self, step: int) -> dict[str, object]:
        """What a checkpoint written at `step` records of R: the value measured at that step, if any
        (pipeline.rankme.model_rankme.training_rankme_meta), so evaluation need not measure it again."""
        if self.latest_record is None or self.latest_step != step:
            return {}
        return {TRAINING_RANKME_KEY: training_rankme_meta(self.latest_record, step=step, readout=self.latest_readout)}


class ThroughputWindow:
    """Metrics of the steps since the last summary.

    samples_per_s counts wall time (data waits, reports, checkpoints and RankMe included);
    step_time_s is the mean time of one step alone (data wait, forward, backward, update).
    """

    def __init__(self) -> None:
        self._step_started = 0.0
        self._reset()

    def _reset(self) -> None:
        self._window_started = time.perf_counter()
        self._losses: list[float] = []
        self._samples = 0
        self._busy_s = 0.0

    def start_step(self) -> None:
        self._step_started = time.perf_counter()

    def end_step(self, loss: float, *, samples: int) -> None:
        self._busy_s += time.perf_counter() - self._step_started
        self._losses.append(loss)
        self._samples += samples

    def summary(self) -> dict[str, float]:
        wall_s = max(time.perf_counter() - self._window_started, 1e-9)
        result = {
            "loss": float(np.mean(self._losses)) if self._losses else math.nan,
            "samples_per_s": self._samples / wall_s,
            "step_time_s": self._busy_s / max(1, len(self._losses)),
        }
        self._reset()
        return result
