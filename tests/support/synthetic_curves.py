"""A trial runner that reports a synthetic RankMe curve to Tune as training would (seconds per trial).

Each trial's RankMe level comes from `RANKME_LEVEL` (by trial name, mask_ratio grid); the curve
rises with the step. Like the train loop, every RankMe point is logged to the trial's MLflow run
first, then reported to Tune, so the early-stop scheduler can act on it.
"""

from __future__ import annotations

import time
from pathlib import Path

from ray import tune

from sweeps.laws.forms import SaturatingLaw
from sweeps.protocol.recipe import rankme_steps_for
from sweeps.record.trial import TrialRecord

# Grid order mask0.50 ... mask0.90; high, low, high, low, high so that the online rule sees the range early.
RANKME_LEVEL = {"mask0.50": 60.0, "mask0.60": 20.0, "mask0.70": 50.0, "mask0.80": 10.0, "mask0.90": 40.0}
TRUE_Q_OF_R = {"q_inf": 0.7, "x_c": 15.0, "alpha": 0.8}
SECONDS_PER_REPORT = 0.15  # long enough for a stop to land before the next report


def rankme_curve(level: float, step: int, train_steps: int) -> float:
    return level * (0.5 + 0.5 * step / train_steps)


def run_curve_trial(spec, context, run) -> TrialRecord:
    storage = Path(context.storage_path)
    storage.mkdir(parents=True, exist_ok=True)
    with open(storage / "executions.txt", "a") as ledger:
        ledger.write(spec.name + "\n")
    level = RANKME_LEVEL[spec.name]
    history = {}
    for step in rankme_steps_for(spec.train_steps):
        history[step] = rankme_curve(level, step, spec.train_steps)
        run.log_metrics({"rankme": history[step]}, step=step)
        tune.report({"step": step, "rankme": history[step]})
        time.sleep(SECONDS_PER_REPORT)
    final_rankme = history[spec.train_steps]
    q = float(SaturatingLaw().predict(TRUE_Q_OF_R, final_rankme))
    return TrialRecord(
        trial=spec.name, model_name=spec.model_name, arch=spec.arch, n_params=1000, hours=3.0, flops=1e12,
        mask_ratio=float(spec.mask_ratio), rankme=final_rankme, rankme_by_step=history,
        q=q, task_scores={"synthetic": q}, rankme_history_logged=True,
    )  # fmt: skip


def scheduler_test_curve(level: float, train_steps: int) -> dict[int, float]:
    """RankMe at each RankMe step of a `train_steps` trial, rising from level * 0.75 to level * 1.5."""
    return {step: level * (0.5 + step / train_steps) for step in rankme_steps_for(train_steps)}


def curve_trainable(config) -> None:
    """A bare Tune trainable: reports the curve of config["level"], then a final Q without a step."""
    for step, value in scheduler_test_curve(config["level"], config["trial"]["train_steps"]).items():
        tune.report({"step": step, "rankme": value})
        time.sleep(0.1)  # a stop lands before the next report
    tune.report({"q": config["level"] / 100})  # no step, no rankme: passes through the scheduler
