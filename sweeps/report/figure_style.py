"""What makes a study figure readable in a paper: plain ticks on a narrow log axis, points named by
trial, checkpoints of one trial joined in step order, and Q error bars only where informative.

Helpers on a matplotlib Axes; sweeps.report.figures draws the figures with them.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.ticker import (
    FixedLocator,
    FuncFormatter,
    MaxNLocator,
    NullFormatter,
    NullLocator,
)

from sweeps.record.keys import Q_METRIC
from sweeps.report.intervals import q_intervals
from sweeps.report.study_info import StudyInfo

ANNOTATION_FONT_SIZE = 6
LABEL_GAP = 0.045  # of Q's range: two 6-point labels on a ~4-inch axis do not touch


def readable_log_ticks(ax, values: pd.Series, *, axis: str = "x") -> None:
    """Under a decade, a log axis gets a few plain decimal ticks (26, 28, 30) instead of
    overlapping `2.6x10^1` minor labels; over a decade matplotlib's own decades read well."""
    finite = pd.to_numeric(values, errors="coerce")
    finite = finite[np.isfinite(finite) & (finite > 0)]
    if finite.empty or finite.max() / finite.min() >= 10:
        return
    low, high = float(finite.min()), float(finite.max())
    ticks = MaxNLocator(nbins=5, steps=[1, 2, 2.5, 5, 10]).tick_values(low, high)
    ticks = ticks[(ticks >= low - 0.05 * (high - low)) & (ticks <= high + 0.05 * (high - low)) & (ticks > 0)]
    if len(ticks) < 2:
        ticks = np.array([low, high])
    target = ax.xaxis if axis == "x" else ax.yaxis
    target.set_major_locator(FixedLocator(list(ticks)))
    target.set_major_formatter(FuncFormatter(lambda value, _: f"{value:.4g}"))
    target.set_minor_locator(NullLocator())
    target.set_minor_formatter(NullFormatter())


def trial_names(trials: pd.DataFrame) -> pd.Series:
    return (
        trials["trial"].astype(str)
        if "trial" in trials.columns
        else pd.Series(trials.index.astype(str), index=trials.index)
    )


def label_points(ax, trials: pd.DataFrame, column: str) -> None:
    """Name each trial beside its point (its last checkpoint, when rows are checkpoints). Labels
    whose points crowd together are stacked upwards, at least LABEL_GAP of Q's range apart, each
    with a thin line to its point, so they never print over each other."""
    names = trial_names(trials)
    ordered = trials.assign(_name=names)
    if "step" in trials.columns:
        ordered = ordered.sort_values("step")
    anchors = sorted(
        (
            (name, float(rows.iloc[-1][column]), float(rows.iloc[-1][Q_METRIC]))
            for name, rows in ordered.groupby("_name", sort=False)
        ),
        key=lambda anchor: anchor[2],
    )
    q = pd.to_numeric(trials[Q_METRIC], errors="coerce")
    gap = LABEL_GAP * max(float(q.max() - q.min()), 1e-6) if q.notna().any() else 0.0
    previous = -np.inf
    for name, x, y in anchors:
        placed = max(y, previous + gap)
        previous = placed
        ax.annotate(
            name, (x, y), xytext=(6, placed), textcoords=("offset points", "data"), va="center",
            fontsize=ANNOTATION_FONT_SIZE, color="dimgray",
            arrowprops=dict(arrowstyle="-", color="lightgray", linewidth=0.6) if placed > y else None,
        )  # fmt: skip


def connect_checkpoints(ax, trials: pd.DataFrame, column: str) -> None:
    """Checkpoints of one trial joined in step order, its final checkpoint marked with a star."""
    if "step" not in trials.columns:
        return
    marked = False
    for _, rows in trials.assign(_name=trial_names(trials)).groupby("_name", sort=False):
        rows = rows.sort_values("step")
        ax.plot(rows[column], rows[Q_METRIC], color="gray", linewidth=0.8, alpha=0.7, zorder=2)
        final = rows.iloc[-1]
        ax.scatter([final[column]], [final[Q_METRIC]], marker="*", s=90, color="tab:orange", zorder=5,
                   label=None if marked else "final checkpoint")  # fmt: skip
        marked = True


def q_error_bars(ax, trials: pd.DataFrame, column: str, info: StudyInfo) -> int:
    """Q's 95% interval as error bars where it can inform (sweeps.report.intervals); how many drawn."""
    verdicts = q_intervals(trials, info)
    shown = [(x, q, v.bounds) for x, q, v in zip(trials[column], trials[Q_METRIC], verdicts) if v.bounds is not None]
    if not shown:
        return 0
    x, q, bounds = zip(*shown)
    low = np.array(q) - np.array([b[0] for b in bounds])
    high = np.array([b[1] for b in bounds]) - np.array(q)
    ax.errorbar(x, q, yerr=[low, high], fmt="none", ecolor="black", elinewidth=0.8, capsize=2, zorder=2,
                label="Q 95% interval")  # fmt: skip
    return len(shown)
