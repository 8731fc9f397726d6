"""A trial's checkpoint as an (R, Q) point: what a trial logs per evaluated checkpoint and reads back.

The paper's Q(R) points are checkpoints (Fig. 1a: every checkpoint under compute constraints), so
a trial evaluates several (its initialisation, Table III's RankMe steps, the last) and logs each
one's `q` and `score/<task>` at that checkpoint's step in the trial's child run, beside `rankme`
at the same step (one quantity: training measured the same pool with the same weights there, so
it is logged again only where training did not). MLflow keeps the history, so reading a run back
gives every point; the last step is the trial's own result (sweeps.record.trial).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from pipeline.rankme.model_rankme import logged_rankme
from pipeline.tracking import runs as tracking
from sweeps.record.keys import (
    LEGACY_EVAL_RANKME_METRIC,
    Q_INTERVAL_KEYS,
    Q_METRIC,
    RANKME_METRIC,
    TASK_SCORE_PREFIX,
)

History = dict[str, list[tuple[int, float]]]  # a run's metric histories, as tracking.read_run gives them

# Decimals a point's values are logged with: what their spread supports, with guard digits, so the
# UI shows 0.5803 where it cut 0.58034613... Q's 95% interval is about +-0.018 on the default tasks
# (test-clip SE of a 7-task Q 0.009: docs/results.md, benchmarks/q_noise_floor.py), so Q's second
# decimal is the first that means something; 4 keep two guard digits and every digit the study prints
# (Q to 4 decimals). RankMe: pipeline.rankme.model_rankme.RANKME_DECIMALS, as training logs it.
Q_DECIMALS = 4


def rounded_metric(value: float, decimals: int) -> float:
    """`value` to `decimals` decimals, as a metric is logged (NaN and inf as they are)."""
    return round(float(value), decimals) if math.isfinite(value) else value


@dataclass(frozen=True, kw_only=True)
class CheckpointPoint:
    rankme: float  # on the study's RankMe pool
    q: float
    task_scores: dict[str, float] = field(default_factory=dict)
    q_ci: tuple[float, float] = (math.nan, math.nan)  # Q's 95% interval (sweeps.study.trainable.q_interval)

    def metrics(self, *, with_rankme: bool = True) -> dict[str, float]:
        """The point's MLflow metrics, rounded (Q_DECIMALS, RANKME_DECIMALS); the interval only where
        both bounds exist (none is a NaN metric)."""
        scores = {
            f"{TASK_SCORE_PREFIX}{task}": rounded_metric(score, Q_DECIMALS) for task, score in self.task_scores.items()
        }
        interval = (
            {key: rounded_metric(bound, Q_DECIMALS) for key, bound in zip(Q_INTERVAL_KEYS, self.q_ci)}
            if all(map(math.isfinite, self.q_ci))
            else {}
        )
        rankme = {RANKME_METRIC: logged_rankme(self.rankme)} if with_rankme else {}
        return {Q_METRIC: rounded_metric(self.q, Q_DECIMALS), **rankme, **scores, **interval}

    def write(self, run: tracking.TrackedRun, step: int, *, with_rankme: bool = True) -> None:
        run.log_metrics(self.metrics(with_rankme=with_rankme), step=step)

    def column_value(self) -> dict[str, float]:
        """The trial table's view of the point: {"rankme", "q", "score/<task>", ["q_ci_low", "q_ci_high"]}."""
        point = {RANKME_METRIC: self.rankme, Q_METRIC: self.q}
        point.update({f"{TASK_SCORE_PREFIX}{task}": score for task, score in self.task_scores.items()})
        if all(map(math.isfinite, self.q_ci)):
            point.update(zip(Q_INTERVAL_KEYS, self.q_ci))
        return point


def write_checkpoint_points(
    run: tracking.TrackedRun, points: dict[int, CheckpointPoint], *, last_step: int, rankme_logged_at: set[int]
) -> None:
    """Each checkpoint before the last at its step (the last is written with the trial's result)."""
    for step, point in sorted(points.items()):
        if step < last_step:
            point.write(run, step, with_rankme=step not in rankme_logged_at)


def read_checkpoint_points(metrics: History) -> dict[int, CheckpointPoint]:
    """Every step with both R and Q in a child run's metric histories; the last logged value at a step wins.

    `rankme` at the step (older studies: `eval_rankme`); a score or interval bound only where logged."""
    q_by_step = dict(metrics.get(Q_METRIC, []))
    rankme_by_step = dict(metrics.get(LEGACY_EVAL_RANKME_METRIC, []) or metrics.get(RANKME_METRIC, []))
    scores = {key: dict(history) for key, history in metrics.items() if key.startswith(TASK_SCORE_PREFIX)}
    bounds = [dict(metrics.get(key, [])) for key in Q_INTERVAL_KEYS]
    points = {}
    for step, q in sorted(q_by_step.items()):
        if step not in rankme_by_step:
            continue  # a point needs both R and Q
        points[int(step)] = CheckpointPoint(
            rankme=rankme_by_step[step],
            q=q,
            task_scores={key.removeprefix(TASK_SCORE_PREFIX): s[step] for key, s in scores.items() if step in s},
            q_ci=tuple(b[step] for b in bounds) if all(step in b for b in bounds) else (math.nan, math.nan),
        )
    return points


def points_column(metrics: History) -> dict[int, dict[str, float]]:
    """The trial table's `checkpoint_points` cell: {} with one evaluated checkpoint (nothing beyond
    the trial's own row), else every point by step."""
    points = read_checkpoint_points(metrics)
    if len(dict(metrics.get(Q_METRIC, []))) < 2:
        return {}
    return {step: point.column_value() for step, point in points.items()}
