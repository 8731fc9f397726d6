"""A study's markdown report, readable without opening code: the trials, the Q(R) trend, the fitted
laws, RankMe's early signal and the early-stop replay, per-task scores, the figures, the method.

Pure functions: a trial table (see sweeps.report.study_fits) and its fits in, markdown text out (the
figures it links are sweeps.report.figures'). Writing it to MLflow or disk is the caller's job.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from sweeps.laws.envelope import ENVELOPE_TOLERANCE
from sweeps.laws.result import LawFit
from sweeps.protocol.early_stop_rule import DEFAULT_CHECK_FRACTION, DEFAULT_KEEP_FRACTION
from sweeps.record.keys import Q_METRIC
from sweeps.report.architectures import architecture_markdown
from sweeps.report.checkpoints import checkpoint_rows
from sweeps.report.early_prediction import early_prediction_markdown
from sweeps.report.early_stop_markdown import early_stop_section, row_names
from sweeps.report.q_of_r_markdown import q_of_r_section
from sweeps.report.rankme_pool_check import rankme_pool_lines
from sweeps.report.seed_spread import seed_spread_markdown
from sweeps.report.study_fits import (
    StudyFits,
    parameters_disagree,
    task_score_columns,
    usable_trials,
)
from sweeps.report.study_info import StudyInfo
from sweeps.report.task_laws import NO_CEILING, q_inf_pinned_at_one, q_inf_reaches_one, task_laws_markdown

# Figure file -> what it shows (the alt text, shown where an image cannot load).
FIGURE_CAPTIONS = {
    "quality_vs_rankme.png": "Q(R)",
    "quality_vs_scale.png": "Q(N), Q(D), Q(C)",
    "quality_isolines_n_d.png": "Q(N, D) iso-lines",
    "early_rankme_vs_final_q.png": "early RankMe vs final Q",
    "quality_vs_rankme_by_architecture.png": "Q(R) per architecture",
}

# How the laws were fitted and checked, in words; sweeps.laws.fits and sweeps.report.q_trend are the code.
METHOD = (
    "Reference estimator (the study's own, paper App. E): least squares on Q itself, Q_inf in [0, 1], every other "
    "parameter > 0 (no cap on exponents, no floor at the best observed Q), R² of Eq. 8 on Q; minimised from a grid of "
    "starts with L-BFGS-B at tight tolerances on a rescaled objective, accepted only with a near-zero projected "
    "gradient and at least two starts agreeing. Q(N,D) is the error form of Eq. 7 (Q rises to Q_inf; Eq. 7 read "
    "literally with positive parameters would make Q fall as N and D grow). Alternative (log_error): least squares "
    "on log(1 - Q), Q_inf bounded to [best observed Q, 1], exponents to (0, 2]; shown where a parameter's 95% "
    "intervals of the two estimators do not overlap. Q(C) is the compute-efficiency frontier's upper envelope (Sec. "
    "IV-E, Fig. 5a: the curve no run surpasses): least squares on the frontier points (the runs whose Q is the best "
    f"reached at or below their compute) with no run above the curve by more than {ENVELOPE_TOLERANCE:g} in Q (SLSQP); its "
    "alternative is the log-error fit to the frontier points. Intervals: percentile bootstrap resampling whole "
    "configurations (all seeds together); for Q(C) the frontier is re-picked in every resample. Extrapolation error: refit without the largest scale and predict it (mean "
    "absolute error in Q). Q(R) trend check (sweeps.report.q_trend): no trend when every trial's 95% interval of Q "
    "shares a common value, RankMe spans under 5%, Q neither rises nor falls with RankMe (Spearman's rank "
    "correlation, p >= 0.05), or the fit's R² is at most 0."
)


def _format_value(value: float) -> str:
    return f"{value:.4g}"


def extrapolation_cell(fit: LawFit) -> str:
    """The leave-largest-out error, or why there is none; a caveat rides along in brackets."""
    if not np.isfinite(fit.extrapolation_error):
        return fit.extrapolation_note or "not computed (no reason recorded)"
    return f"{fit.extrapolation_error:.4f}" + (f" ({fit.extrapolation_note})" if fit.extrapolation_note else "")


def _r2_cell(fit: LawFit) -> str:
    return f"{fit.r2:.3f}" if np.isfinite(fit.r2) else "undefined: Q is the same at every point"


def _aicc_cell(fit: LawFit) -> str:
    if np.isfinite(fit.aicc):
        return f"{fit.aicc:.1f}"
    return f"undefined: {fit.n_points} points for {len(fit.params)} parameters, AICc needs points > parameters + 1"


def _interval_note(name: str, fit: LawFit) -> str | None:
    """Why a fit's parameters carry no bootstrap interval, when they do not."""
    if fit.ci:
        return None
    diagnostics = fit.diagnostics
    if diagnostics.n_bootstrap_failed == 0:
        return f"- {name}: no bootstrap intervals: the fit was run without bootstrap resamples (n_bootstrap 0)."
    failed = diagnostics.n_bootstrap_failed
    return f"- {name}: no bootstrap intervals: all {failed} bootstrap refits failed to converge."


def fit_table_markdown(study: StudyFits) -> str:
    lines = [
        "| law | parameters (95% bootstrap interval) | R² | AICc | BIC | extrapolation error | points |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, fit in study.fits.items():
        params = "; ".join(
            f"{key} {_format_value(value)}"
            + (
                f" ({NO_CEILING})"
                if q_inf_pinned_at_one(fit, key)
                else f" ({_format_value(fit.ci[key][0])}-{_format_value(fit.ci[key][1])})"
                if key in fit.ci
                else ""
            )
            for key, value in fit.params.items()
        )
        lines.append(
            f"| {name} | {params} | {_r2_cell(fit)} | {_aicc_cell(fit)} | {fit.bic:.1f} | {extrapolation_cell(fit)} "
            f"| {fit.n_points} |"
        )
    notes = [note for name, fit in study.fits.items() if (note := _interval_note(name, fit))]
    return "\n".join(lines + ([""] + notes if notes else []))


def _law_sentence(name: str, fit: LawFit, trials: pd.DataFrame) -> str:
    """One plain sentence per law, flagging a Q_inf at its bound 1 or at/below the best observed Q, and
    a fit that explains none of the variation (R² at most 0: the no-trend criterion of sweeps.report.q_trend)."""
    if not fit.r2 > 0.0:
        return (
            f"- {name}: not informative: the fit explains none of the variation in Q (R² {fit.r2:.3g} over "
            f"{fit.n_points} points); its parameters describe noise."
        )
    q_inf = fit.params["q_inf"]
    interval = (
        ""
        if q_inf_pinned_at_one(fit, "q_inf")
        else (f" (95% {fit.ci['q_inf'][0]:.3f}-{fit.ci['q_inf'][1]:.3f})" if "q_inf" in fit.ci else "")
    )
    if q_inf >= 1.0 - 1e-9:
        saturation = "shows no saturation in the studied range (Q_inf reached its bound 1)"
    elif q_inf_reaches_one(fit):
        # The interval runs to the bound: "saturated at 0.564 (95% 0.561-1.000)" would claim a ceiling
        # the data do not establish, so only the low end is stated.
        saturation = (
            f"has no established ceiling: Q_inf = {q_inf:.3f}, but its 95% interval runs from "
            f"{fit.ci['q_inf'][0]:.3f} to the bound 1"
        )
    elif q_inf <= trials[Q_METRIC].max() + 1e-9:
        saturation = f"has saturated: Q_inf = {q_inf:.3f}{interval} is at or below the best observed Q"
    else:
        saturation = f"approaches Q_inf = {q_inf:.3f}{interval}"
    if np.isfinite(fit.extrapolation_error):
        error = extrapolation_cell(fit)
        extrapolation = f"Refitted without the largest scale, the law predicted it within {error} in Q."
    else:
        extrapolation = f"Extrapolation error {extrapolation_cell(fit)}."
    return f"- {name}: quality {saturation}; exponent {fit.params['alpha']:.3f}. {extrapolation}"


def alternative_fits_markdown(study: StudyFits) -> list[str]:
    """The log-error fit beside the reference, for the laws where their 95% intervals part."""
    lines = []
    for name, reference in study.fits.items():
        alternative = study.alternatives.get(name)
        disagreeing = parameters_disagree(reference, alternative) if alternative is not None else []
        if disagreeing:
            one = StudyFits(fits={f"{name} (log_error)": alternative}, skipped={}, n_trials_used=0, n_trials_failed=0)
            lines += [
                "", (f"{name}: the log-error alternative's 95% intervals do not overlap the reference's for "
                     f"{', '.join(sorted(disagreeing))}:"), "", fit_table_markdown(one),
            ]  # fmt: skip
    if study.alternatives and not lines:
        lines = ["", "The log-error alternative's 95% intervals overlap the reference's for every law and parameter."]
    return lines


def frontier_sentence(trials: pd.DataFrame, study: StudyFits) -> list[str]:
    """Which trials form Q(C)'s compute-efficiency frontier (the points Eq. 6 is fitted to)."""
    if study.q_c_frontier is None:
        return []
    names = row_names(trials)
    on = [names[i] for i in np.flatnonzero(study.q_c_frontier)]
    return [f"- Q(C) frontier (Sec. IV-E, Fig. 5a): {len(on)} of {len(names)} trial rows: {', '.join(on)}."]


def _score_cell(values: pd.Series, statistic: str) -> str:
    finite = values[np.isfinite(values.astype(float))]
    return f"{finite.agg(statistic):.4f}" if len(finite) else "none: no trial has a finite score"


def _task_scores_section(trials: pd.DataFrame) -> list[str]:
    scores = task_score_columns(trials)
    if not scores:
        return []
    lines = ["", "## Per-task scores (mean over trial rows)", "", "| task | mean | best |", "|---|---|---|"]
    lines += [
        f"| {c.removeprefix('score/')} | {_score_cell(trials[c], 'mean')} | {_score_cell(trials[c], 'max')} |"
        for c in scores
    ]
    return lines


def figures_markdown(figure_names: list[str], sources: dict[str, str] | None = None) -> list[str]:
    """One embedded image per figure (`![caption](source)`), each followed by its file's name in the
    run's artifacts (a relative link would resolve against the UI page, not the artifact folder)."""
    lines = []
    for name in figure_names:
        caption = FIGURE_CAPTIONS.get(name, name)
        lines += [f"![{caption}]({(sources or {}).get(name, name)})", "", f"file: `laws/{name}`", ""]
    return lines


def laws_section(trials: pd.DataFrame, study: StudyFits) -> list[str]:
    """The fitted laws: table, one sentence each, the frontier, the alternative, and what was not fitted,
    which slice Q(N) / Q(D) used, and any cross-check that failed."""
    sections = ["", "## Fitted laws", ""]
    if study.fits:
        sections += [fit_table_markdown(study), ""]
        sections += [_law_sentence(name, fit, trials) for name, fit in study.fits.items()]
        sections += frontier_sentence(trials, study)
        sections += alternative_fits_markdown(study)
    else:
        sections.append("No law could be fitted.")
    sections += [f"- {name} not fitted: {reason}." for name, reason in study.skipped.items()]
    sections += [f"- {name} fitted {where}." for name, where in study.slices.items()]
    sections += [f"- {name}: {reason}." for name, reason in study.fit_failures.items()]
    return sections


def study_markdown(
    study_name: str,
    table: pd.DataFrame,
    study: StudyFits,
    figure_names: list[str],
    *,
    keep_fraction: float = DEFAULT_KEEP_FRACTION,
    check_fraction: float = DEFAULT_CHECK_FRACTION,
    info: StudyInfo | None = None,
    figure_sources: dict[str, str] | None = None,
) -> str:
    """The study report: what ran, whether Q(R) has a trend, the laws, RankMe's early signal, the figures.

    `keep_fraction` and `check_fraction` are the early-stop rule the replay applies (the study's own);
    `info` the study's grid, probe and seeds; `figure_sources` maps a figure file to the URL its
    image loads from (default: the file name, relative to the report).
    """
    trials, n_failed = usable_trials(table)
    best = trials.loc[trials[Q_METRIC].idxmax()] if len(trials) else None
    sections = [f"# Scaling study `{study_name}`", ""]
    points = checkpoint_rows(trials)
    evaluated = f" ({len(points)} evaluated checkpoints: Q(R)'s points)" if len(points) > len(trials) else ""
    sections.append(
        f"{len(trials)} finished trial rows were fitted{evaluated}; {n_failed} failed or unscored row(s) were left out."
    )
    if best is not None:
        described = ", ".join(
            f"{c}={best[c]:.4g}" if isinstance(best[c], float) else f"{c}={best[c]}"
            for c in ("trial", "arch", "n_params", "hours", "mask_ratio")
            if c in trials.columns
        )
        sections.append(f"Best final-checkpoint quality Q = {best[Q_METRIC]:.4f} ({described}).")
        if len(points) > len(trials):  # an earlier checkpoint may score higher than any last one
            top = points.loc[points[Q_METRIC].idxmax()]
            sections.append(
                f"Best of all evaluated checkpoints: {top['trial']} at step {int(top['step'])}, "
                f"Q = {top[Q_METRIC]:.4f}, RankMe R {top['rankme']:.2f}."
            )
    sections += q_of_r_section(table, study, info) + rankme_pool_lines(trials)
    sections += laws_section(trials, study)
    sections += seed_spread_markdown(trials)
    sections += architecture_markdown(trials, study.architecture_fits, study.architecture_skipped)
    if "rankme_by_step" in trials.columns and len(trials):
        sections += early_prediction_markdown(trials)
        sections += early_stop_section(table, keep_fraction=keep_fraction, check_fraction=check_fraction)
    sections += _task_scores_section(trials)
    sections += task_laws_markdown(study.task_laws, study.task_skipped)
    sections += ["", "## Figures", ""] + figures_markdown(figure_names, figure_sources)
    sections += ["", "## Method", "", METHOD]
    return "\n".join(sections) + "\n"
