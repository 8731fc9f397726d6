"""Fig. 7's view of an architecture study: Q against RankMe, one colour per architecture, each with
its own fitted Q(R) over its points' range, and the law over all architectures in black.

Coloured by architecture, not by trial (the other figures' rule): the figure compares
architectures, and an architecture's trials (its sizes) share its law and so its colour."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")  # no display on workers and CI; must precede pyplot

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from sweeps.laws.result import LawFit
from sweeps.record.keys import Q_METRIC
from sweeps.report.checkpoints import checkpoint_rows
from sweeps.report.external_points import plot_external_points
from sweeps.report.figure_style import paper_style, readable_log_ticks
from sweeps.report.label_layout import legend_below, settle
from sweeps.report.study_info import StudyInfo, quality_axis_label, rankme_axis_label

ARCHITECTURE_FIGURE_SIZE_IN = (6.4, 4.6)


def plot_quality_vs_rankme_by_architecture(
    trials: pd.DataFrame,
    overall: LawFit | None,
    per_architecture: dict[str, LawFit],
    *,
    info: StudyInfo | None = None,
    external: pd.DataFrame | None = None,
) -> Figure:
    points = checkpoint_rows(trials)
    with paper_style():
        figure, ax = plt.subplots(figsize=ARCHITECTURE_FIGURE_SIZE_IN, layout="constrained")
        colours = plt.get_cmap("tab10")
        for index, (arch, rows) in enumerate(points.groupby("arch", sort=True)):
            colour = colours(index % 10)
            ax.scatter(rows["rankme"], rows[Q_METRIC], s=20, color=colour, label=arch, zorder=3)
            fit = per_architecture.get(arch)
            if fit is not None:
                x = np.geomspace(float(rows["rankme"].min()), float(rows["rankme"].max()), 100)
                ax.plot(x, fit.predict(x), color=colour, linewidth=1.2)
        if overall is not None and len(points):
            x = np.geomspace(float(points["rankme"].min()), float(points["rankme"].max()), 200)
            ax.plot(x, overall.predict(x), color="black", linestyle="--", label=f"all (R² {overall.r2:.3f})")
        placed = plot_external_points(ax, external)
        ax.set_xscale("log")
        readable_log_ticks(ax, pd.concat([points["rankme"], placed["rankme"]]) if len(placed) else points["rankme"])
        ax.set_xlabel(rankme_axis_label(trials))
        ax.set_ylabel(quality_axis_label(trials))
        n_trials = int(points["trial"].nunique()) if "trial" in points.columns else None
        ax.set_title((info or StudyInfo()).title("Q(R) per architecture", len(points), n_trials))
        legend_below(ax, ncol=4)
        settle(figure)
    return figure
