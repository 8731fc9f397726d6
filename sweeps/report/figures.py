"""A study's figures: Q against RankMe and scale with the fitted laws, Q(N, D) iso-lines, early RankMe.

Pure functions: a trial table (see sweeps.report.fits) and its fits in, matplotlib figures out.
Writing them to MLflow or disk is the caller's job.
"""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")  # no display on workers and CI; must precede pyplot

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from sweeps.laws.result import LawFit  # noqa: E402
from sweeps.report.early_prediction import pearson_early_prediction  # noqa: E402
from sweeps.report.fits import SATURATING_LAWS, StudyFits, usable_trials  # noqa: E402

FIGURE_SIZE_IN = (5.0, 3.8)


def _curve_axis(values: pd.Series) -> np.ndarray:
    low, high = float(values.min()), float(values.max())
    return np.geomspace(low, high * 1.5, 200)  # a little beyond the data: the extrapolation shows


def plot_quality_vs(table: pd.DataFrame, column: str, fit: LawFit | None, *, label: str, ax=None) -> Figure:
    """Q against one scale variable (log axis), with the fitted law and its bootstrap band."""
    trials, _ = usable_trials(table)
    figure = ax.figure if ax is not None else plt.figure(figsize=FIGURE_SIZE_IN)
    ax = ax if ax is not None else figure.add_subplot()
    ax.scatter(trials[column], trials["q"], s=18, color="black", zorder=3, label="trials")
    if fit is not None:
        x = _curve_axis(trials[column])
        ax.plot(x, fit.predict(x), color="tab:blue", label=f"fit (R² {fit.r2:.3f})")
        low, high = fit.predict_interval(x)
        if np.all(np.isfinite(low)):
            ax.fill_between(
                x, low, high, color="tab:blue", alpha=0.2, label=f"{100 * fit.ci_level:.0f}% band"
            )
        ax.axhline(fit.params["q_inf"], color="tab:blue", linestyle=":", linewidth=1)
    ax.set_xscale("log")
    ax.set_xlabel(label)
    ax.set_ylabel("quality Q")
    ax.legend(fontsize="small")
    return figure


def plot_scaling_panels(table: pd.DataFrame, study: StudyFits) -> Figure:
    """Q against N, D and C side by side."""
    figure, axes = plt.subplots(1, 3, figsize=(15.0, 3.8))
    for ax, name in zip(axes, ("Q(N)", "Q(D)", "Q(C)")):
        column, label = SATURATING_LAWS[name]
        if column in table.columns:
            plot_quality_vs(table, column, study.fits.get(name), label=label, ax=ax)
        ax.set_title(name if name in study.fits else f"{name}: not fitted")
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
        trials["n_params"], trials["hours"], c=trials["q"], cmap="viridis", edgecolors="black", zorder=3
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


def plot_early_prediction(table: pd.DataFrame) -> Figure:
    """Left: RankMe at each logged step against final Q; right: Pearson r by step."""
    trials, _ = usable_trials(table)
    correlations = pearson_early_prediction(trials["rankme_by_step"], trials["q"])
    figure, (scatter_ax, r_ax) = plt.subplots(1, 2, figsize=(10.0, 3.8))
    colours = plt.get_cmap("viridis")(np.linspace(0.0, 1.0, max(len(correlations), 1)))
    histories = [{int(k): float(v) for k, v in dict(h).items()} for h in trials["rankme_by_step"]]
    for colour, step in zip(colours, correlations["step"]):
        pairs = [(h[step], q) for h, q in zip(histories, trials["q"]) if step in h]
        rankmes, qs = np.array(pairs).T
        scatter_ax.scatter(rankmes, qs, s=14, color=colour, label=f"step {step}")
    scatter_ax.set(xlabel="RankMe at step", ylabel="final Q", title="early RankMe vs final Q")
    if len(correlations):  # fewer than 3 trials at every step: nothing plotted, no legend
        scatter_ax.legend(fontsize="x-small")
    r_ax.plot(correlations["step"], correlations["pearson_r"], marker="o")
    r_ax.set(
        xlabel="training step", ylabel="Pearson r with final Q", ylim=(-1.05, 1.05), title="early prediction"
    )
    figure.tight_layout()
    return figure


def study_figures(table: pd.DataFrame, study: StudyFits) -> dict[str, Figure]:
    """Every figure the table supports, keyed by a file name."""
    figures = {}
    if "rankme" in table.columns:
        figures["quality_vs_rankme.png"] = plot_quality_vs(
            table, "rankme", study.fits.get("Q(R)"), label="RankMe R"
        )
    if {"n_params", "hours", "flops"} & set(table.columns):
        figures["quality_vs_scale.png"] = plot_scaling_panels(table, study)
    if "Q(N,D)" in study.fits:
        figures["quality_isolines_n_d.png"] = plot_joint_isolines(table, study.fits["Q(N,D)"])
    if "rankme_by_step" in table.columns:
        figures["early_rankme_vs_final_q.png"] = plot_early_prediction(table)
    return figures
