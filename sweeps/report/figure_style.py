"""What makes a study figure printable: paper-sized fonts, plain ticks on a narrow log axis, each
trial in its own colour (sweeps.report.run_colours) with its checkpoints joined in step order and
its name beside its last point, and Q error bars only where informative.

Helpers on a matplotlib Axes; sweeps.report.figures draws the figures with them, inside
`paper_style()`, and ends each with sweeps.report.label_layout.settle.
"""

from __future__ import annotations

import matplotlib
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
from sweeps.report.label_layout import add_point_label
from sweeps.report.run_colours import text_colour
from sweeps.report.study_info import StudyInfo

# Sizes for a figure printed at its own size (a two-column paper's full width is about 7 inches):
# nothing under 7 points.
PAPER_RC = {
    "font.size": 8.0, "axes.titlesize": 9.0, "axes.labelsize": 8.5, "xtick.labelsize": 7.5,
    "ytick.labelsize": 7.5, "legend.fontsize": 7.5, "figure.titlesize": 9.5, "axes.spines.top": False,
    "axes.spines.right": False, "lines.linewidth": 1.2, "axes.linewidth": 0.8,
}  # fmt: skip
# What the scale axes measure, with their units (the law's letter first, as in the fits' names).
SCALE_AXIS_LABELS = {
    "n_params": "model size N (parameters)",
    "hours": "data volume D (hours of pretraining audio)",
    "flops": "compute C (training FLOPs)",
}
NEUTRAL = "0.35"  # what is no trial's: error bars, leader lines, baselines


def paper_style():
    """The rc settings every study figure is drawn under (fonts are fixed when an artist is made)."""
    return matplotlib.rc_context(PAPER_RC)


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


def _last_points(trials: pd.DataFrame, column: str) -> list[tuple[str, float, float]]:
    """(name, x, Q) of each trial's last point (its last checkpoint, when rows are checkpoints)."""
    ordered = trials.assign(_name=trial_names(trials))
    if "step" in trials.columns:
        ordered = ordered.sort_values("step", kind="stable")
    return [(name, float(rows.iloc[-1][column]), float(rows.iloc[-1][Q_METRIC]))
            for name, rows in ordered.groupby("_name", sort=False)]  # fmt: skip


def label_points(ax, trials: pd.DataFrame, column: str, colours: dict[str, str]) -> None:
    """Name each trial beside its last point, in its colour; sweeps.report.label_layout.settle moves
    labels apart where points crowd (each trial's label window never overlaps another's)."""
    for name, x, y in _last_points(trials, column):
        if np.isfinite(x) and np.isfinite(y):
            add_point_label(ax, name, x, y, colour=text_colour(colours.get(name, "black")))


def connect_checkpoints(ax, trials: pd.DataFrame, column: str, colours: dict[str, str]) -> None:
    """Each trial's points in its colour, its checkpoints joined in step order, its final checkpoint
    a star. One legend entry each for "checkpoint" and "final checkpoint" (black: the colours name
    trials, the labels say which)."""
    marked = False
    has_steps = "step" in trials.columns
    for name, rows in trials.assign(_name=trial_names(trials)).groupby("_name", sort=False):
        colour = colours.get(name, "black")
        rows = rows.sort_values("step", kind="stable") if has_steps else rows
        if has_steps and len(rows) > 1:
            ax.plot(rows[column], rows[Q_METRIC], color=colour, linewidth=0.9, alpha=0.8, zorder=2)
            ax.scatter(rows[column].iloc[:-1], rows[Q_METRIC].iloc[:-1], s=16, color=colour, edgecolors="white",
                       linewidths=0.4, zorder=3)  # fmt: skip
        final = rows.iloc[-1]
        ax.scatter([final[column]], [final[Q_METRIC]], marker="*" if has_steps else "o", s=80 if has_steps else 24,
                   color=colour, edgecolors="black", linewidths=0.5, zorder=4)  # fmt: skip
        marked = True
    if marked and has_steps:  # legend proxies: what the marks mean, whatever the trial
        ax.scatter([], [], s=16, color="0.5", edgecolors="white", linewidths=0.4, label="checkpoint")
        ax.scatter([], [], marker="*", s=80, color="0.5", edgecolors="black", linewidths=0.5, label="final checkpoint")
    elif marked:
        ax.scatter([], [], s=24, color="0.5", edgecolors="black", linewidths=0.5, label="trial (last point)")


def q_error_bars(ax, trials: pd.DataFrame, column: str, info: StudyInfo) -> int:
    """Q's 95% interval as error bars where it can inform (sweeps.report.intervals); how many drawn."""
    verdicts = q_intervals(trials, info)
    shown = [(x, q, v.bounds) for x, q, v in zip(trials[column], trials[Q_METRIC], verdicts) if v.bounds is not None]
    if not shown:
        return 0
    x, q, bounds = zip(*shown)
    low = np.array(q) - np.array([b[0] for b in bounds])
    high = np.array([b[1] for b in bounds]) - np.array(q)
    ax.errorbar(x, q, yerr=[low, high], fmt="none", ecolor=NEUTRAL, elinewidth=0.6, capsize=1.5, alpha=0.7,
                zorder=1, label="Q 95% interval")  # fmt: skip
    return len(shown)
