"""A trial's checkpoints as (R, Q) points: what the study logs per checkpoint and reads back.

The paper's Q(R) points are checkpoints (Fig. 1a: every checkpoint under compute constraints), so
a trial evaluates several (its initialisation, Table III's RankMe steps, the last) and logs each
one's `q` and `score/<task>` at that checkpoint's step in the trial's child run, beside `rankme`
at the same step (one quantity: training measured the same pool with the same weights there, so
it is logged again only where training did not). MLflow keeps the history, so reading a run back
gives every point; the last step is the trial's own result (what `trial_table_from_runs` reads).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from pipeline.tracking import runs as tracking

TASK_SCORE_PREFIX = "score/"  # as sweeps.report.task_laws names the per-task columns
POINTS_COLUMN = "checkpoint_points"  # trial table column: {step: {"rankme", "q", "score/<task>"}}
INTERVAL_KEYS = ("q_ci_low", "q_ci_high")  # a checkpoint's Q interval, where one was measured


@dataclass(frozen=True, kw_only=True)
class CheckpointPoint:
    rankme: float  # on the study's RankMe pool
    q: float
    task_scores: dict[str, float] = field(default_factory=dict)
    q_ci: tuple[float, float] = (math.nan, math.nan)  # Q's 95% interval (sweeps.study.trial.q_interval)


def log_checkpoint_points(
    run: tracking.TrackedRun, points: dict[int, CheckpointPoint], *, last_step: int, rankme_logged_at: set[int]
) -> None:
    """Each checkpoint before the last at its step (the last is logged with the trial's result)."""
    for step, point in sorted(points.items()):
        if step < last_step:
            scores = {f"{TASK_SCORE_PREFIX}{task}": score for task, score in point.task_scores.items()}
            rankme = {} if step in rankme_logged_at else {"rankme": point.rankme}
            interval = dict(zip(INTERVAL_KEYS, point.q_ci)) if all(map(math.isfinite, point.q_ci)) else {}
            run.log_metrics({"q": point.q, **rankme, **scores, **interval}, step=step)


def checkpoint_points_of(metrics: dict[str, list[tuple[int, float]]]) -> dict[int, dict[str, float]]:
    """{step: {"rankme", "q", "score/<task>", ["q_ci_low", "q_ci_high"]}} from a child run's metric histories; {} with one
    evaluated checkpoint (nothing beyond the trial's own row)."""
    q_by_step = dict(metrics.get("q", []))
    if len(q_by_step) < 2:
        return {}
    # `rankme` at the step (older studies: `eval_rankme`); the last value logged at a step wins.
    rankme_by_step = dict(metrics.get("eval_rankme", []) or metrics.get("rankme", []))
    points = {}
    for step, q in sorted(q_by_step.items()):
        if step not in rankme_by_step:
            continue  # a point needs both R and Q
        point = {"rankme": rankme_by_step[step], "q": q}
        for key, history in metrics.items():
            if (key.startswith(TASK_SCORE_PREFIX) or key in INTERVAL_KEYS) and (
                value := dict(history).get(step)
            ) is not None:
                point[key] = value
        points[int(step)] = point
    return points
