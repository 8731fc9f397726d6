"""The best point against what it must beat: its own initialisation and the study's baselines,
each difference with its paired test-clip interval where both sides logged Q replicates.

Replicate b of every evaluation on the same tasks resamples the same test clips
(pipeline.evaluate.probes.bootstrap), so the interval of a difference is taken over the paired
differences (pipeline.evaluate.scores.paired_interval): the luck of the test split cancels.
A seeded probe (the MLP) logs no replicates; its lines say so instead of pairing.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import pandas as pd

from pipeline.evaluate.baselines import CONTROL, INITIALISATION, NAIVE
from pipeline.evaluate.scores import paired_interval
from sweeps.record.baseline import BaselineRecord
from sweeps.record.keys import Q_METRIC, RANKME_METRIC, RUN_ID_COLUMN, TASK_SCORE_PREFIX

BASELINE_LABELS = {NAIVE: "naive features", INITIALISATION: "random initialisation", CONTROL: "positive control"}


@dataclass(frozen=True, kw_only=True)
class Comparisons:
    """What pairs with the study's points: its baselines (with their Q replicates) and each trial's
    replicates by run id (read on demand: only the best point's trial is read)."""

    baselines: tuple[BaselineRecord, ...] = ()
    baseline_replicates: dict[str, tuple[float, ...]] = field(default_factory=dict)
    replicates_of: Callable[[str], dict[int, tuple[float, ...]]] = field(default=lambda run_id: {})


def difference_text(difference: float, interval: tuple[float, float] | None) -> str:
    """'+0.0316 (paired 95% +0.0092 to +0.0523: beyond the noise)', or the bare difference when unpaired."""
    if interval is None:
        return f"{difference:+.4f} (no paired interval: the probe logged no test-clip replicates)"
    low, high = interval
    verdict = "above the noise" if low > 0 else "below, beyond the noise" if high < 0 else "within the noise"
    return f"{difference:+.4f} (paired 95% {low:+.4f} to {high:+.4f}: {verdict})"


def _step_replicates(best: pd.Series, comparisons: Comparisons, step) -> tuple[float, ...]:
    """The replicates `best`'s trial logged at `step`; a row without a step (a trial evaluated only at
    its end) is its last evaluated step."""
    run_id = best.get(RUN_ID_COLUMN)
    if not isinstance(run_id, str) or not run_id:
        return ()
    logged = comparisons.replicates_of(run_id)
    if step is None or not math.isfinite(float(step)):
        return logged[max(logged)] if logged else ()
    return logged.get(int(step), ())


def gain_interval(best: pd.Series, comparisons: Comparisons) -> tuple[float, float] | None:
    """Paired 95% interval of Q(best) - Q(step 0 of its trial); None where the trial logged no replicates."""
    ours = _step_replicates(best, comparisons, best["step"])
    return paired_interval(ours, _step_replicates(best, comparisons, 0))


def initialisation_lines(best: pd.Series, initial: pd.Series, comparisons: Comparisons) -> list[str]:
    """The best point against its own trial's step 0: Q with the paired interval, and R at both."""
    difference = float(best[Q_METRIC] - initial[Q_METRIC])
    lines = [
        f"vs its initialisation (step 0 of the same trial, Q {initial[Q_METRIC]:.4f}): "
        + difference_text(difference, gain_interval(best, comparisons))
    ]
    if RANKME_METRIC in best.index:
        lines.append(f"R at initialisation {initial[RANKME_METRIC]:.2f}, at the best point {best[RANKME_METRIC]:.2f}")
    return lines


def baseline_lines(best: pd.Series, tasks: list[str], comparisons: Comparisons) -> list[str]:
    """Each baseline's Q, the best point minus it (paired), the tasks where the best is above it, and
    the positive control's headroom over the initialisation: Q's room to reward a better representation."""
    if not comparisons.baselines:
        return ["baselines: none measured for this study (sweeps.scaling --baselines)"]
    ours = _step_replicates(best, comparisons, best.get("step"))
    lines = ["baselines, measured on the study's tasks with its probe (best point minus each):"]
    for baseline in comparisons.baselines:
        interval = paired_interval(ours, comparisons.baseline_replicates.get(baseline.name, ()))
        above = [
            t for t in tasks if t in baseline.task_scores and best[f"{TASK_SCORE_PREFIX}{t}"] > baseline.task_scores[t]
        ]
        lines.append(
            f"  {BASELINE_LABELS.get(baseline.name, baseline.name)} ({baseline.description}): Q {baseline.q:.4f}; "
            f"best - it {difference_text(float(best[Q_METRIC]) - baseline.q, interval)}; "
            f"best above it on {len(above)} of {len(tasks)} tasks"
        )
    by_name = {b.name: b for b in comparisons.baselines}
    if CONTROL in by_name and INITIALISATION in by_name:
        replicates = comparisons.baseline_replicates
        interval = paired_interval(replicates.get(CONTROL, ()), replicates.get(INITIALISATION, ()))
        headroom = by_name[CONTROL].q - by_name[INITIALISATION].q
        lines.append(f"  Q's headroom on these tasks (control - initialisation): {difference_text(headroom, interval)}")
    return lines
