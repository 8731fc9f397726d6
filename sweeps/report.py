"""A study's figures and a markdown report a researcher can read without opening code.

Pure functions: a trial table (see sweeps.study_fits) and its fits in, matplotlib figures and
markdown text out. Writing them to MLflow or disk is the caller's job.
"""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")  # no display on workers and CI; must precede pyplot

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from sweeps.early_prediction import simulate_rankme_early_stop  # noqa: E402
from sweeps.laws import LawFit, pearson_early_prediction  # noqa: E402
from sweeps.study_fits import SATURATING_LAWS, StudyFits, task_score_columns, usable_trials  # noqa: E402

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


def _format_value(value: float) -> str:
    return f"{value:.4g}"


def fit_table_markdown(study: StudyFits) -> str:
    lines = [
        "| law | parameters (95% bootstrap interval) | R² | AICc | BIC | extrapolation error | points |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, fit in study.fits.items():
        params = "; ".join(
            f"{key} {_format_value(value)}"
            + (f" ({_format_value(fit.ci[key][0])}-{_format_value(fit.ci[key][1])})" if key in fit.ci else "")
            for key, value in fit.params.items()
        )
        lines.append(
            f"| {name} | {params} | {fit.r2:.3f} | {fit.aicc:.1f} | {fit.bic:.1f} | {fit.extrapolation_error:.4f} | {fit.n_points} |"
        )
    return "\n".join(lines)


def _law_sentence(name: str, fit: LawFit, trials: pd.DataFrame) -> str:
    """One plain sentence per law, flagging a Q_inf that sits on one of its bounds."""
    q_inf = fit.params["q_inf"]
    interval = f" (95% {fit.ci['q_inf'][0]:.3f}-{fit.ci['q_inf'][1]:.3f})" if "q_inf" in fit.ci else ""
    if q_inf >= 1.0 - 1e-9:
        saturation = "shows no saturation in the studied range (Q_inf reached its bound 1)"
    elif q_inf <= trials["q"].max() + 1e-9:
        saturation = f"has saturated: Q_inf = {q_inf:.3f} sits at the best observed Q (its lower bound)"
    else:
        saturation = f"approaches Q_inf = {q_inf:.3f}{interval}"
    return (
        f"- {name}: quality {saturation}; exponent {fit.params['alpha']:.3f}. Refitted without the largest scale, "
        f"the law predicted it within {fit.extrapolation_error:.4f} in Q."
    )


def study_markdown(study_name: str, table: pd.DataFrame, study: StudyFits, figure_names: list[str]) -> str:
    """The study report: what ran, what the laws say, how well RankMe predicted, the figures."""
    trials, n_failed = usable_trials(table)
    best = trials.loc[trials["q"].idxmax()] if len(trials) else None
    sections = [f"# Scaling study `{study_name}`", ""]
    sections.append(
        f"{len(trials)} finished trial rows were fitted; {n_failed} failed or unscored row(s) were left out."
    )
    if best is not None:
        described = ", ".join(
            f"{c}={best[c]}" for c in ("arch", "n_params", "hours", "mask_ratio") if c in trials.columns
        )
        sections.append(f"Best quality Q = {best['q']:.4f} ({described}).")
    sections += ["", "## Fitted laws", ""]
    if study.fits:
        sections.append(fit_table_markdown(study))
        sections.append("")
        sections += [_law_sentence(name, fit, trials) for name, fit in study.fits.items()]
    else:
        sections.append("No law could be fitted.")
    for name, reason in study.skipped.items():
        sections.append(f"- {name} not fitted: {reason}.")
    if "rankme_by_step" in trials.columns and len(trials):
        correlations = pearson_early_prediction(trials["rankme_by_step"], trials["q"])
        sections += [
            "",
            "## Does early RankMe predict final quality?",
            "",
            "| step | Pearson r | trials |",
            "|---|---|---|",
        ]
        sections += [
            f"| {row.step} | {row.pearson_r:.3f} | {row.n_trials} |" for row in correlations.itertuples()
        ]
        names = trials["trial"] if "trial" in trials.columns else trials.index.astype(str)
        stops = simulate_rankme_early_stop(trials["rankme_by_step"], trials["q"], names)
        if len(stops):
            sections += [
                "",
                "Simulated RankMe early stopping (keep the top half by RankMe at the step, stop the rest):",
                "",
                "| stop at step | trials kept | steps saved | best configuration kept |",
                "|---|---|---|---|",
            ]
            sections += [
                f"| {row.step} | {row.trials_kept} | {100 * row.steps_saved_fraction:.0f}% | "
                f"{'yes' if row.best_kept else 'no'} |"
                for row in stops.itertuples()
            ]
    scores = task_score_columns(trials)
    if scores:
        sections += [
            "",
            "## Per-task scores (mean over trial rows)",
            "",
            "| task | mean | best |",
            "|---|---|---|",
        ]
        sections += [
            f"| {c.removeprefix('score/')} | {trials[c].mean():.4f} | {trials[c].max():.4f} |" for c in scores
        ]
    sections += ["", "## Figures", ""] + [f"![{name}]({name})" for name in figure_names]
    sections += [
        "",
        "## Method",
        "",
        "Laws are fitted on the error 1 - Q in log space (log-sum-exp form), Q_inf bounded to [best observed Q, 1], "
        "exponents to (0, 2], from a grid of starts with L-BFGS-B at tight tolerances on a rescaled objective; a fit is "
        "accepted only with a near-zero gradient and at least two starts agreeing. Intervals: percentile bootstrap "
        "resampling whole configurations (all seeds together). Extrapolation error: refit without the largest scale "
        "and predict it (mean absolute error in Q).",
    ]
    return "\n".join(sections) + "\n"
