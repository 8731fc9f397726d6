"""A study's figures: Q against RankMe and scale with the fitted laws, Q(N, D) iso-lines, early RankMe.

Pure functions: a trial table (see sweeps.report.fits) and its fits in, matplotlib figures out.
Writing them to MLflow or disk is the caller's job.
"""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")  # no display on workers and CI; must precede pyplot

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.figure import Figure

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
from sweeps.report.external_points import drawable_external_points, plot_external_points
from sweeps.report.figure_style import (
    connect_checkpoints,
    label_points,
    q_error_bars,
    readable_log_ticks,
)
from sweeps.report.fits import (
    CONVERGED_VIEW,
    SATURATING_LAWS,
    StudyFits,
    converged_rows,
    usable_trials,
)
from sweeps.report.q_trend import check_q_of_r
from sweeps.report.study_info import StudyInfo, rankme_axis_label

FIGURE_SIZE_IN = (5.0, 3.8)
EXTERNAL_LEGEND_WIDTH_IN = 2.4  # the legend moves beside the axes when outside models are drawn


# The study's baselines as horizontal lines on Q(R): naive features, initialisation, positive control.
BASELINE_STYLES = (
    {"color": "tab:gray", "linestyle": "--"},
    {"color": "tab:orange", "linestyle": "-."},
    {"color": "tab:green", "linestyle": "--"},
)


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
    ax=None,
    frontier: np.ndarray | None = None,
    rows: pd.Series | None = None,
    info: StudyInfo | None = None,
    external: pd.DataFrame | None = None,
    baselines: dict[str, float] | None = None,
) -> Figure:
    """Q against one scale variable (log axis), with the fitted law and its bootstrap band over the
    data's range, each trial named, checkpoints of a trial joined, informative Q error bars.
    `baselines` ({label: Q}, measured on the study's tasks and probe) are drawn as horizontal lines.

    `frontier` (per usable trial) rings the points the fit was made on (Q(C)'s efficiency frontier);
    `rows` (per usable trial) restricts the points drawn (Fig. 1b: converged checkpoints only);
    `external` (Q(R) only: name, rankme, q) adds outside models as named diamonds, not fitted.
    """
    trials, _ = usable_trials(table)
    if rows is not None:
        trials = trials[rows.to_numpy()]
    legend_outside = bool(len(drawable_external_points(external)) or baselines)  # a long legend: beside the axes
    width_in = FIGURE_SIZE_IN[0] + (EXTERNAL_LEGEND_WIDTH_IN if legend_outside else 0.0)
    figure = ax.figure if ax is not None else plt.figure(figsize=(width_in, FIGURE_SIZE_IN[1]))
    ax = ax if ax is not None else figure.add_subplot()
    connect_checkpoints(ax, trials, column)
    q_error_bars(ax, trials, column, info or StudyInfo())
    ax.scatter(trials[column], trials[Q_METRIC], s=18, color="black", zorder=3, label="trials")
    label_points(ax, trials, column)
    if frontier is not None and frontier.any():
        ax.scatter(
            trials[column][frontier], trials[Q_METRIC][frontier], s=70, facecolors="none", edgecolors="tab:red",
            zorder=4, label="frontier (fitted)",
        )  # fmt: skip
    if fit is not None:
        x = _curve_axis(trials[column])
        ax.plot(x, fit.predict(x), color="tab:blue", label=f"fit (R² {fit.r2:.3f})")
        low, high = fit.predict_interval(x)
        if np.all(np.isfinite(low)):
            ax.fill_between(x, low, high, color="tab:blue", alpha=0.2, label=f"{100 * fit.ci_level:.0f}% band")
        span = float(np.ptp(trials[Q_METRIC])) or 0.05
        if fit.params["q_inf"] <= trials[Q_METRIC].max() + span:  # far above the data it only squashes the points
            ax.axhline(fit.params["q_inf"], color="tab:blue", linestyle=":", linewidth=1, label="Q_inf")
    for (name, q), style in zip((baselines or {}).items(), BASELINE_STYLES, strict=False):
        ax.axhline(q, linewidth=1, label=f"{name} (Q {q:.3f})", **style)
    placed = plot_external_points(ax, external)
    ax.set_xscale("log")
    readable_log_ticks(ax, pd.concat([trials[column], placed["rankme"]]) if len(placed) else trials[column])
    ax.set_xlabel(label)
    ax.set_ylabel("quality Q")
    # Beside the axes when outside models or baselines are drawn: inside, "best" covers points.
    ax.legend(fontsize="small", **({"loc": "upper left", "bbox_to_anchor": (1.02, 1.0)} if legend_outside else {}))
    return figure


def plot_rankme_views(
    table: pd.DataFrame,
    study: StudyFits,
    info: StudyInfo | None = None,
    external: pd.DataFrame | None = None,
    baselines: dict[str, float] | None = None,
) -> Figure:
    """Paper Fig. 1: (a) Q(R) over all checkpoints; (b) over converged ones, when the table says which.
    Titled with the study, grid, probe and number of points (trials only); `external` models are
    drawn on each view as in the paper's Table IV (*), apart from the trials and not fitted."""
    info = info or StudyInfo()
    trials, _ = usable_trials(table)
    points = checkpoint_rows(trials)  # (a) every evaluated checkpoint, as Q(R) is fitted
    label = rankme_axis_label(trials)
    title = info.title("Q(R)", len(points))
    # Without a detectable trend (sweeps.report.q_trend) the fitted curve and its band would draw a
    # law through a cloud: the points are shown, the curve is not, and the title says why.
    check = check_q_of_r(table, study, info)
    q_of_r = study.fits.get("Q(R)") if check is None or check.detectable else None
    if q_of_r is None and "Q(R)" in study.fits:
        title += "\nno detectable trend: no law drawn"
    if CONVERGED_VIEW not in study.fits:
        figure = plot_quality_vs(points, "rankme", q_of_r, label=label, info=info, external=external,
                                 baselines=baselines)  # fmt: skip
        figure.axes[0].set_title(title, fontsize="small")
        figure.tight_layout()
        return figure
    extra_in = 2 * EXTERNAL_LEGEND_WIDTH_IN if len(drawable_external_points(external)) or baselines else 0.0
    figure, (all_ax, converged_ax) = plt.subplots(1, 2, figsize=(10.0 + extra_in, 4.2))
    plot_quality_vs(points, "rankme", q_of_r, label=label, ax=all_ax, info=info, external=external,
                    baselines=baselines)  # fmt: skip
    plot_quality_vs(
        table, "rankme", study.fits[CONVERGED_VIEW], label=label, ax=converged_ax, rows=converged_rows(trials),
        info=info, external=external, baselines=baselines,
    )  # fmt: skip
    all_ax.set_title("(a) all checkpoints")
    converged_ax.set_title("(b) converged checkpoints")
    figure.suptitle(title, fontsize="medium")
    figure.tight_layout()
    return figure


def plot_scaling_panels(table: pd.DataFrame, study: StudyFits, info: StudyInfo | None = None) -> Figure:
    """Q against N, D and C side by side; Q(C) fitted to, and ringing, its efficiency frontier."""
    figure, axes = plt.subplots(1, 3, figsize=(15.0, 3.8))
    for ax, name in zip(axes, ("Q(N)", "Q(D)", "Q(C)")):
        column, label = SATURATING_LAWS[name]
        if column in table.columns:
            frontier = study.q_c_frontier if name == "Q(C)" else None
            plot_quality_vs(table, column, study.fits.get(name), label=label, ax=ax, frontier=frontier, info=info)
        ax.set_title(name if name in study.fits else f"{name}: not fitted")
    figure.suptitle((info or StudyInfo()).title("Q against scale", len(usable_trials(table)[0])), fontsize="medium")
    figure.tight_layout()
    return figure


def plot_joint_isolines(table: pd.DataFrame, fit: LawFit) -> Figure:
    """Iso-quality lines of Q(N, D) over the studied range, with the trials coloured by Q."""
    trials, _ = usable_trials(table)
    n_axis, d_axis = _curve_axis(trials["n_params"]), _curve_axis(trials["hours"])
    n_grid, d_grid = np.meshgrid(n_axis, d_axis)
    figure = plt.figure(figsize=FIGURE_SIZE_IN)
    ax = figure.add_subplot()
    contours = ax.contour(n_grid, d_grid, fit.predict(n_grid, d_grid), levels=8, cmap="viridis")
    ax.clabel(contours, fontsize="x-small", fmt="%.3f")
    points = ax.scatter(
        trials["n_params"], trials["hours"], c=trials[Q_METRIC], cmap="viridis", edgecolors="black", zorder=3
    )
    figure.colorbar(points, ax=ax, label="observed Q")
    ax.set(
        xscale="log",
        yscale="log",
        xlabel="parameters N",
        ylabel="pretraining hours D",
        title="Q(N, D) iso-lines",
    )
    return figure


def _draw_early_correlations(r_ax: plt.Axes, correlations: pd.DataFrame, n_trials: int) -> None:
    """Pearson r by fraction with its 95% (Fisher z) band, Table III's values beside it, and a note
    when every interval covers r = 0: a few trials cannot show early prediction either way."""
    fractions, r = correlations["fraction"].to_numpy(float), correlations["pearson_r"].to_numpy(float)
    low, high = correlations["r_ci_low"].to_numpy(float), correlations["r_ci_high"].to_numpy(float)
    r_ax.plot(fractions, r, marker="o", label="this study")
    with_interval = np.isfinite(low) & np.isfinite(high)
    if with_interval.any():
        r_ax.fill_between(fractions[with_interval], low[with_interval], high[with_interval], alpha=0.2,
                          label="95% interval (Fisher z)")  # fmt: skip
        if ((low[with_interval] <= 0.0) & (high[with_interval] >= 0.0)).all():
            r_ax.text(0.03, 0.04, f"every 95% interval covers r = 0 ({n_trials} trials)", transform=r_ax.transAxes,
                      fontsize="x-small")  # fmt: skip
    paper_fractions = [step / PAPER_TABLE_III_FINAL_STEP for step in PAPER_TABLE_III]
    r_ax.plot(paper_fractions, list(PAPER_TABLE_III.values()), marker="s", linestyle="none",
              color="tab:red", label="paper Table III (step / 700k)")  # fmt: skip
    r_ax.set(
        xlabel="fraction of the training horizon", ylabel="Pearson r with final Q", ylim=(-1.05, 1.05),
        title="early prediction",
    )  # fmt: skip
    r_ax.legend(fontsize="x-small")


def plot_early_prediction(table: pd.DataFrame, info: StudyInfo | None = None) -> Figure:
    """Left: RankMe at each fraction of training against final Q; right: Pearson r by fraction."""
    trials, _ = usable_trials(table)
    horizons = trials["train_steps"] if "train_steps" in trials.columns else None
    correlations = pearson_early_prediction(trials["rankme_by_step"], trials[Q_METRIC], horizons)
    points = early_points(trials["rankme_by_step"], horizons)
    figure, (scatter_ax, r_ax) = plt.subplots(1, 2, figsize=(10.0, 3.8))
    colours = plt.get_cmap("viridis")(np.linspace(0.0, 1.0, max(len(correlations), 1)))
    for colour, fraction in zip(colours, correlations["fraction"]):
        pairs = [(trial[fraction][1], q) for trial, q in zip(points, trials[Q_METRIC]) if fraction in trial]
        rankmes, qs = np.array(pairs).T
        scatter_ax.scatter(rankmes, qs, s=14, color=colour, label=f"{100 * fraction:.1f}% of training")
    scatter_ax.set(
        xlabel=f"{rankme_axis_label(trials)} at that step", ylabel="final Q", title="early RankMe vs final Q"
    )
    if len(correlations):  # fewer than 3 trials at every fraction: nothing plotted, no legend
        scatter_ax.legend(fontsize="x-small")
    _draw_early_correlations(r_ax, correlations, len(trials))
    figure.suptitle((info or StudyInfo()).title("Early prediction", len(trials)), fontsize="medium")
    figure.tight_layout()
    return figure


def study_figures(
    table: pd.DataFrame,
    study: StudyFits,
    info: StudyInfo | None = None,
    *,
    external: pd.DataFrame | None = None,
    baselines: dict[str, float] | None = None,
) -> dict[str, Figure]:
    """Every figure the table supports, keyed by a file name; Q against scale only where a scale law
    was fitted (a mask-ratio study's N, D and C move only as side effects). `external` points
    (sweeps.report.external_points) go on the Q(R) figure only: they have no N, D or C of the study."""
    figures = {}
    if "rankme" in table.columns:
        figures["quality_vs_rankme.png"] = plot_rankme_views(table, study, info, external, baselines)
    if {"Q(N)", "Q(D)", "Q(C)"} & set(study.fits):
        figures["quality_vs_scale.png"] = plot_scaling_panels(table, study, info)
    if "Q(N,D)" in study.fits:
        figures["quality_isolines_n_d.png"] = plot_joint_isolines(table, study.fits["Q(N,D)"])
    if study.architecture_fits or study.architecture_skipped:
        trials, _ = usable_trials(table)
        figures["quality_vs_rankme_by_architecture.png"] = plot_quality_vs_rankme_by_architecture(
            trials, study.fits.get("Q(R)"), study.architecture_fits, info=info, external=external
        )
    if "rankme_by_step" in table.columns:
        figures["early_rankme_vs_final_q.png"] = plot_early_prediction(table, info)
    return figures
