"""A study's figures: Q against RankMe and scale with the fitted laws, Q(N, D) iso-lines, early RankMe.

Pure functions: a trial table (see sweeps.report.study_fits) and its fits in, matplotlib figures out,
drawn for print (sweeps.report.figure_style): one colour per trial, the same in every figure and in
the MLflow UI (sweeps.report.run_colours), trial labels that never overlap and legends outside the
data (sweeps.report.label_layout), one-line titles. Writing them to MLflow or disk is the caller's
job (sweeps.report.figure_files: a PNG and a PDF each).
"""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")  # no display on workers and CI; must precede pyplot

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from sweeps.laws.result import LawFit
from sweeps.record.keys import Q_METRIC
from sweeps.report.architecture_figure import plot_quality_vs_rankme_by_architecture
from sweeps.report.checkpoints import checkpoint_rows
from sweeps.report.early_prediction import (
    PAPER_TABLE_III,
    PAPER_TABLE_III_FINAL_STEP,
    early_points,
    pearson_early_prediction,
)
from sweeps.report.external_points import plot_external_points
from sweeps.report.figure_style import (
    NEUTRAL,
    SCALE_AXIS_LABELS,
    connect_checkpoints,
    label_points,
    paper_style,
    q_error_bars,
    readable_log_ticks,
    trial_names,
)
from sweeps.report.label_layout import add_point_label, legend_below, settle
from sweeps.report.q_trend import check_q_of_r
from sweeps.report.run_colours import text_colour, trial_colours
from sweeps.report.study_fits import (
    CONVERGED_VIEW,
    SATURATING_LAWS,
    StudyFits,
    converged_rows,
    usable_trials,
)
from sweeps.report.study_info import StudyInfo, quality_axis_label, rankme_axis_label

# Inches. A two-column paper's full width is about 7; each figure is drawn at the size it prints at.
Q_OF_R_SIZE_IN = (6.4, 4.6)  # the legend sits under the axes, not beside them
TWO_PANEL_SIZE_IN = (7.0, 4.4)
SCALE_PANELS_SIZE_IN = (7.0, 3.6)
ISOLINES_SIZE_IN = (5.6, 4.6)
NO_LAW_NOTE = "no law drawn: no detectable trend"
# The study's baselines as horizontal lines on Q(R): naive features, initialisation, positive
# control. Grey, told apart by their dashes: colour is the trials'.
BASELINE_STYLES = (
    {"color": NEUTRAL, "linestyle": (0, (5, 2))},
    {"color": NEUTRAL, "linestyle": (0, (5, 2, 1, 2))},
    {"color": NEUTRAL, "linestyle": (0, (1, 1.5))},
)
FRACTION_MARKERS = ("o", "s", "^", "D", "v", "P", "X", "h")


def note_entry(text: str) -> Line2D:
    """A legend entry that is only words (a note on what is, or is not, drawn)."""
    return Line2D([], [], linestyle="none", marker="none", label=text)


def _curve_axis(values: pd.Series) -> np.ndarray:
    """The fit and its band over the data's range only: beyond it the band is an extrapolation."""
    low, high = float(values.min()), float(values.max())
    return np.geomspace(low, high, 200)


def plot_quality_vs(
    table: pd.DataFrame,
    column: str,
    fit: LawFit | None,
    *,
    label: str,
    ax,
    colours: dict[str, str] | None = None,
    frontier: np.ndarray | None = None,
    rows: pd.Series | None = None,
    info: StudyInfo | None = None,
    external: pd.DataFrame | None = None,
    baselines: dict[str, float] | None = None,
) -> None:
    """Q against one scale variable (log axis) on `ax`: each trial in its colour, its checkpoints
    joined and its name beside its last point, the fitted law (black) and its bootstrap band over
    the data's range, informative Q error bars; `baselines` ({label: Q}, measured on the study's
    tasks and probe) as grey horizontal lines.

    `frontier` (per usable trial) rings the points the fit was made on (Q(C)'s efficiency frontier);
    `rows` (per usable trial) restricts the points drawn (Fig. 1b: converged checkpoints only);
    `external` (Q(R) only: name, rankme, q) adds outside models as named diamonds, not fitted.
    """
    trials, _ = usable_trials(table)
    if rows is not None:
        trials = trials[rows.to_numpy()]
    colours = colours if colours is not None else trial_colours(trials)
    q_error_bars(ax, trials, column, info or StudyInfo())
    connect_checkpoints(ax, trials, column, colours)
    label_points(ax, trials, column, colours)
    if frontier is not None and frontier.any():
        ax.scatter(
            trials[column][frontier], trials[Q_METRIC][frontier], s=110, facecolors="none", edgecolors="black",
            linewidths=0.8, zorder=4, label="frontier (fitted)",
        )  # fmt: skip
    if fit is not None:
        x = _curve_axis(trials[column])
        ax.plot(x, fit.predict(x), color="black", linewidth=1.4, zorder=3, label=f"fit (R² {fit.r2:.3f})")
        low, high = fit.predict_interval(x)
        if np.all(np.isfinite(low)):
            ax.fill_between(x, low, high, color="0.6", alpha=0.25, linewidth=0, zorder=1,
                            label=f"{100 * fit.ci_level:.0f}% band")  # fmt: skip
        span = float(np.ptp(trials[Q_METRIC])) or 0.05
        if fit.params["q_inf"] <= trials[Q_METRIC].max() + span:  # far above the data it only squashes the points
            ax.axhline(fit.params["q_inf"], color="black", linestyle=":", linewidth=0.9, label="Q_inf")
    for (name, q), style in zip((baselines or {}).items(), BASELINE_STYLES, strict=False):
        ax.axhline(q, linewidth=1.0, zorder=1, label=f"{name} (Q {q:.3f})", **style)
    placed = plot_external_points(ax, external)
    ax.set_xscale("log")
    readable_log_ticks(ax, pd.concat([trials[column], placed["rankme"]]) if len(placed) else trials[column])
    ax.set_xlabel(label)
    ax.set_ylabel(quality_axis_label(trials))


def _legend_entries(axes) -> tuple[list, list[str]]:
    """Every axes' legend entries, each label once (the panels of one figure share their styles)."""
    handles, labels = [], []
    for ax in axes:
        for handle, text in zip(*ax.get_legend_handles_labels()):
            if text not in labels:
                handles.append(handle)
                labels.append(text)
    return handles, labels


def plot_rankme_views(
    table: pd.DataFrame,
    study: StudyFits,
    info: StudyInfo | None = None,
    external: pd.DataFrame | None = None,
    baselines: dict[str, float] | None = None,
    colours: dict[str, str] | None = None,
) -> Figure:
    """Paper Fig. 1: (a) Q(R) over all checkpoints; (b) over converged ones, when the table says which.
    Titled with the number of points and trials and the probe; `external` models are drawn on each
    view as in the paper's Table IV (*), apart from the trials and not fitted."""
    info = info or StudyInfo()
    trials, _ = usable_trials(table)
    colours = colours if colours is not None else trial_colours(table)
    points = checkpoint_rows(trials)  # (a) every evaluated checkpoint, as Q(R) is fitted
    label = rankme_axis_label(trials)
    title = info.title("Q(R)", len(points), int(trial_names(points).nunique()))
    # Without a detectable trend (sweeps.report.q_trend) the fitted curve and its band would draw a
    # law through a cloud: the points are shown, the curve is not, and the legend says why.
    check = check_q_of_r(table, study, info)
    q_of_r = study.fits.get("Q(R)") if check is None or check.detectable else None
    notes = [note_entry(NO_LAW_NOTE)] if q_of_r is None and "Q(R)" in study.fits else []
    common = {"label": label, "info": info, "external": external, "baselines": baselines, "colours": colours}
    with paper_style():
        if CONVERGED_VIEW not in study.fits:
            figure, ax = plt.subplots(figsize=Q_OF_R_SIZE_IN, layout="constrained")
            plot_quality_vs(points, "rankme", q_of_r, ax=ax, **common)
            ax.set_title(title)
            handles, labels = ax.get_legend_handles_labels()
            legend_below(ax, handles + notes, labels + [note.get_label() for note in notes], ncol=3)
        else:
            figure, (all_ax, converged_ax) = plt.subplots(1, 2, figsize=TWO_PANEL_SIZE_IN, layout="constrained")
            plot_quality_vs(points, "rankme", q_of_r, ax=all_ax, **common)
            plot_quality_vs(table, "rankme", study.fits[CONVERGED_VIEW], ax=converged_ax, rows=converged_rows(trials),
                            **common)  # fmt: skip
            all_ax.set_title("(a) all checkpoints")
            converged_ax.set_title("(b) converged checkpoints")
            figure.suptitle(title)
            handles, labels = _legend_entries((all_ax, converged_ax))
            figure.legend(handles + notes, labels + [note.get_label() for note in notes], loc="outside lower center",
                          ncol=4, frameon=False)  # fmt: skip
        settle(figure)
    return figure


def plot_scaling_panels(
    table: pd.DataFrame, study: StudyFits, info: StudyInfo | None = None, colours: dict[str, str] | None = None
) -> Figure:
    """Q against N, D and C side by side; Q(C) fitted to, and ringing, its efficiency frontier."""
    colours = colours if colours is not None else trial_colours(table)
    with paper_style():
        figure, axes = plt.subplots(1, 3, figsize=SCALE_PANELS_SIZE_IN, layout="constrained", sharey=True)
        for ax, name in zip(axes, ("Q(N)", "Q(D)", "Q(C)")):
            column, _ = SATURATING_LAWS[name]
            if column in table.columns:
                frontier = study.q_c_frontier if name == "Q(C)" else None
                plot_quality_vs(table, column, study.fits.get(name), label=SCALE_AXIS_LABELS[column], ax=ax,
                                frontier=frontier, info=info, colours=colours)  # fmt: skip
            ax.set_title(name if name in study.fits else f"{name}: not fitted")
        for ax in axes[1:]:
            ax.set_ylabel("")
        n_trials = len(usable_trials(table)[0])
        figure.suptitle((info or StudyInfo()).title("Q against scale", n_trials, n_trials))
        handles, labels = _legend_entries(axes)
        figure.legend(handles, labels, loc="outside lower center", ncol=5, frameon=False)
        settle(figure)
    return figure


def plot_joint_isolines(table: pd.DataFrame, fit: LawFit, colours: dict[str, str] | None = None) -> Figure:
    """Iso-quality lines of Q(N, D) over the studied range (grey, labelled with the fitted Q), each
    trial in its colour and named with its observed Q, so the two read against each other."""
    trials, _ = usable_trials(table)
    colours = colours if colours is not None else trial_colours(table)
    n_axis, d_axis = _curve_axis(trials["n_params"]), _curve_axis(trials["hours"])
    n_grid, d_grid = np.meshgrid(n_axis, d_axis)
    with paper_style():
        figure, ax = plt.subplots(figsize=ISOLINES_SIZE_IN, layout="constrained")
        contours = ax.contour(n_grid, d_grid, fit.predict(n_grid, d_grid), levels=8, colors="0.55", linewidths=0.8)
        ax.clabel(contours, fontsize=7, fmt="%.3f")
        names = trial_names(trials)
        for name, n, d, q in zip(names, trials["n_params"], trials["hours"], trials[Q_METRIC]):
            colour = colours.get(name, "black")
            ax.scatter([n], [d], s=36, color=colour, edgecolors="black", linewidths=0.5, zorder=3)
            add_point_label(ax, f"{name} (Q {q:.3f})", float(n), float(d), colour=text_colour(colour))
        ax.set(xscale="log", yscale="log", xlabel=SCALE_AXIS_LABELS["n_params"], ylabel=SCALE_AXIS_LABELS["hours"],
               title=f"Q(N, D) iso-lines: {len(trials)} trials")  # fmt: skip
        legend_below(ax, [Line2D([], [], color="0.55", linewidth=0.8),
                          Line2D([], [], marker="o", linestyle="none", color="0.5", markeredgecolor="black")],
                     ["fitted Q(N, D), constant along each line", "trial (observed Q)"], ncol=2)  # fmt: skip
        settle(figure)
    return figure


def _draw_early_correlations(r_ax: plt.Axes, correlations: pd.DataFrame, n_trials: int) -> list[Line2D]:
    """Pearson r by fraction with its 95% (Fisher z) band and Table III's values beside it; returns
    a note for the legend when every interval covers r = 0 (a few trials cannot show early
    prediction either way)."""
    fractions, r = correlations["fraction"].to_numpy(float), correlations["pearson_r"].to_numpy(float)
    low, high = correlations["r_ci_low"].to_numpy(float), correlations["r_ci_high"].to_numpy(float)
    r_ax.axhline(0.0, color="0.8", linewidth=0.6, zorder=0)
    r_ax.plot(fractions, r, marker="o", markersize=4, color="black", label="this study")
    notes = []
    with_interval = np.isfinite(low) & np.isfinite(high)
    if with_interval.any():
        r_ax.fill_between(fractions[with_interval], low[with_interval], high[with_interval], color="0.6", alpha=0.3,
                          linewidth=0, label="95% interval (Fisher z)")  # fmt: skip
        if ((low[with_interval] <= 0.0) & (high[with_interval] >= 0.0)).all():
            notes.append(note_entry(f"every 95% interval covers r = 0 ({n_trials} trials)"))
    paper_fractions = [step / PAPER_TABLE_III_FINAL_STEP for step in PAPER_TABLE_III]
    r_ax.plot(paper_fractions, list(PAPER_TABLE_III.values()), marker="s", markersize=4.5, linestyle="none",
              markerfacecolor="white", markeredgecolor="black", label="paper Table III (step / 700k, 45 models)")  # fmt: skip
    r_ax.set(xlabel="fraction of the training horizon (step / final step)",
             ylabel=f"Pearson r with final Q ({n_trials} trials)", ylim=(-1.05, 1.05), title="(b) early prediction")  # fmt: skip
    return notes


def plot_early_prediction(table: pd.DataFrame, info: StudyInfo | None = None,
                          colours: dict[str, str] | None = None) -> Figure:  # fmt: skip
    """Left: each trial's RankMe at each fraction of training (marker) against its final Q, in its
    colour, joined in training order; right: Pearson r by fraction."""
    trials, _ = usable_trials(table)
    colours = colours if colours is not None else trial_colours(table)
    horizons = trials["train_steps"] if "train_steps" in trials.columns else None
    correlations = pearson_early_prediction(trials["rankme_by_step"], trials[Q_METRIC], horizons)
    points = early_points(trials["rankme_by_step"], horizons)
    fractions = list(correlations["fraction"])  # those with enough trials to correlate
    markers = dict(zip(fractions, FRACTION_MARKERS * (len(fractions) // len(FRACTION_MARKERS) + 1)))
    with paper_style():
        figure, (scatter_ax, r_ax) = plt.subplots(1, 2, figsize=TWO_PANEL_SIZE_IN, layout="constrained")
        drawn = 0
        for name, trial, q in zip(trial_names(trials), points, trials[Q_METRIC]):
            shown = [(fraction, trial[fraction][1]) for fraction in fractions if fraction in trial]
            if not shown or not np.isfinite(q):
                continue
            colour = colours.get(name, "black")
            scatter_ax.plot([rankme for _, rankme in shown], [q] * len(shown), color=colour, linewidth=0.8, alpha=0.7)
            for fraction, rankme in shown:
                scatter_ax.scatter([rankme], [q], marker=markers[fraction], s=26, color=colour, edgecolors="black",
                                   linewidths=0.4, zorder=3)  # fmt: skip
            add_point_label(scatter_ax, name, float(shown[-1][1]), float(q), colour=text_colour(colour))
            drawn += len(shown)
        scatter_ax.set(xlabel=f"{rankme_axis_label(trials)} part-way through training",
                       ylabel=f"final {quality_axis_label(trials)}", title="(a) early RankMe vs final Q")  # fmt: skip
        if fractions:  # fewer than 3 trials at every fraction: nothing plotted, no legend
            legend_below(scatter_ax, [Line2D([], [], marker=markers[f], linestyle="none", color="0.5",
                                             markeredgecolor="black", markeredgewidth=0.4) for f in fractions],
                         [f"{100 * f:.1f}% of training" for f in fractions], ncol=2)  # fmt: skip
        notes = _draw_early_correlations(r_ax, correlations, len(trials))
        handles, labels = r_ax.get_legend_handles_labels()
        legend_below(r_ax, handles + notes, labels + [note.get_label() for note in notes], ncol=1)
        figure.suptitle((info or StudyInfo()).title("Early RankMe vs final Q", drawn, len(trials)))
        settle(figure)
    return figure


def study_figures(
    table: pd.DataFrame,
    study: StudyFits,
    info: StudyInfo | None = None,
    *,
    external: pd.DataFrame | None = None,
    baselines: dict[str, float] | None = None,
    colours: dict[str, str] | None = None,
) -> dict[str, Figure]:
    """Every figure the table supports, keyed by a file name; Q against scale only where a scale law
    was fitted (a mask-ratio study's N, D and C move only as side effects). `external` points
    (sweeps.report.external_points) go on the Q(R) figure only: they have no N, D or C of the study.
    Each trial has one colour in all of them (`colours`, by default `trial_colours` of the table)."""
    colours = colours if colours is not None else trial_colours(table)
    figures = {}
    if "rankme" in table.columns:
        figures["quality_vs_rankme.png"] = plot_rankme_views(table, study, info, external, baselines, colours)
    if {"Q(N)", "Q(D)", "Q(C)"} & set(study.fits):
        figures["quality_vs_scale.png"] = plot_scaling_panels(table, study, info, colours)
    if "Q(N,D)" in study.fits:
        figures["quality_isolines_n_d.png"] = plot_joint_isolines(table, study.fits["Q(N,D)"], colours)
    if study.architecture_fits or study.architecture_skipped:
        trials, _ = usable_trials(table)
        figures["quality_vs_rankme_by_architecture.png"] = plot_quality_vs_rankme_by_architecture(
            trials, study.fits.get("Q(R)"), study.architecture_fits, info=info, external=external
        )
    if "rankme_by_step" in table.columns:
        figures["early_rankme_vs_final_q.png"] = plot_early_prediction(table, info, colours)
    return figures
