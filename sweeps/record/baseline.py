"""A study's baseline as a child run: the naive features, the random initialisation or the
positive control, scored on the study's own tasks with its own probe (pipeline.evaluate.baselines).

Its child run (`baseline-<name>@<study>`) is tagged `audioscale.baseline` = name, which keeps it
out of the trial table and the fits; metrics `baseline.q` and `baseline.score/<task>` (names of its
own, sweeps.record.keys says why) and `seconds`, the measurement's time, which is also the run's
Duration; its Q replicates (sweeps.record.replicates) pair it with every checkpoint of the study.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pipeline.evaluate.baselines import BaselineScore
from pipeline.tracking import runs as tracking
from sweeps.record import keys
from sweeps.record.checkpoint_point import Q_DECIMALS, rounded_metric
from sweeps.record.replicates import read_q_replicates, write_q_replicates

RunDict = dict[str, Any]


@dataclass(frozen=True, kw_only=True)
class BaselineRecord:
    name: str  # pipeline.evaluate.baselines: NAIVE | INITIALISATION | CONTROL
    q: float
    description: str = ""
    task_scores: dict[str, float] = field(default_factory=dict)
    seconds: float = float("nan")
    run_id: str = field(default="", compare=False)

    @classmethod
    def of(cls, score: BaselineScore) -> BaselineRecord:
        return cls(name=score.name, q=score.q, description=score.description, task_scores=score.task_scores,
                   seconds=score.seconds)  # fmt: skip

    def run_name(self, study_name: str) -> str:
        return keys.child_run_name(study_name, f"{keys.BASELINE_RUN_PREFIX}{self.name}")

    def write(self, run: tracking.TrackedRun, replicates: tuple[float, ...] = ()) -> None:
        run.set_tags({keys.BASELINE_TAG: self.name})
        run.log_params({"baseline": self.name, "description": self.description})
        prefix = keys.BASELINE_METRIC_PREFIX
        # Rounded as a trial's point is (sweeps.record.checkpoint_point): one precision in one table.
        scores = {f"{prefix}{keys.TASK_SCORE_PREFIX}{task}": rounded_metric(score, Q_DECIMALS)
                  for task, score in self.task_scores.items()}  # fmt: skip
        q = rounded_metric(self.q, Q_DECIMALS)
        run.log_metrics({f"{prefix}{keys.Q_METRIC}": q, "seconds": self.seconds, **scores}, step=0)
        write_q_replicates(run, {0: replicates})

    @classmethod
    def from_run(cls, run: RunDict) -> BaselineRecord:
        metrics = run["metrics"]
        prefix = keys.BASELINE_METRIC_PREFIX
        if f"{prefix}{keys.Q_METRIC}" not in metrics:  # written before baselines had names of their own
            prefix = ""
        q = metrics.get(f"{prefix}{keys.Q_METRIC}")
        return cls(
            name=run["tags"][keys.BASELINE_TAG],
            q=q[-1][1] if q else float("nan"),
            description=run["params"].get("description", ""),
            task_scores={
                key.removeprefix(f"{prefix}{keys.TASK_SCORE_PREFIX}"): history[-1][1]
                for key, history in metrics.items()
                if key.startswith(f"{prefix}{keys.TASK_SCORE_PREFIX}")
            },  # fmt: skip
            seconds=metrics["seconds"][-1][1] if metrics.get("seconds") else float("nan"),
            run_id=run["run_id"],
        )

    def replicates(self, tracking_uri: str) -> tuple[float, ...]:
        return read_q_replicates(tracking_uri, self.run_id).get(0, ())


def is_baseline(run: RunDict) -> bool:
    return bool(run["tags"].get(keys.BASELINE_TAG))
