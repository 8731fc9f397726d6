"""The study run's numbers in MLflow: each law's parameters, intervals, R² and extrapolation error as
metrics (named `law.<law key>.<parameter>`), where the two estimators disagree, and which trials
form Q(C)'s compute-efficiency frontier (paper Sec. IV-E)."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from pipeline.tracking import runs as tracking
from sweeps.record.keys import ON_FRONTIER_METRIC, Q_C_FRONTIER_TAG, RUN_ID_COLUMN, TRIAL_PARAM
from sweeps.report.markdown import extrapolation_cell
from sweeps.report.study_fits import StudyFits, parameters_disagree, usable_trials


def metric_key(law_name: str) -> str:
    """'Q(N,D)' -> 'q_n_d': MLflow metric names allow no parentheses or commas."""
    return "_".join(part for part in re.split(r"[^a-z0-9]+", law_name.lower()) if part)


def law_metrics(study: StudyFits) -> tuple[dict[str, float], dict[str, str]]:
    """Each law's parameters, intervals, R² and extrapolation error; and why any of them is not finite."""
    metrics: dict[str, float] = {}
    for name, fit in study.fits.items():
        prefix = f"law.{metric_key(name)}"
        metrics.update({f"{prefix}.{key}": value for key, value in fit.params.items()})
        metrics.update({f"{prefix}.{key}_ci_low": low for key, (low, _) in fit.ci.items()})
        metrics.update({f"{prefix}.{key}_ci_high": high for key, (_, high) in fit.ci.items()})
        metrics.update({f"{prefix}.r2": fit.r2, f"{prefix}.extrapolation_error": fit.extrapolation_error})
        if name in study.alternatives:
            alternative = study.alternatives[name]
            metrics.update({f"{prefix}.log_error.{key}": value for key, value in alternative.params.items()})
            metrics[f"{prefix}.log_error.r2"] = alternative.r2
    reasons = {key: "not finite" for key, value in metrics.items() if not np.isfinite(value)}
    for name, fit in study.fits.items():
        key = f"law.{metric_key(name)}.extrapolation_error"
        if key in reasons:
            reasons[key] = extrapolation_cell(fit)
    return {key: readable(value) for key, value in metrics.items() if key not in reasons}, reasons


# A fitted parameter carries its bootstrap interval beside it: digits past the fourth significant
# one are noise, and the UI's metric tables print them all (q_inf 0.9999999999997456).
SIGNIFICANT_DIGITS = 4


def readable(value: float) -> float:
    return float(f"{value:.{SIGNIFICANT_DIGITS}g}")


def disagreement_tags(study: StudyFits) -> dict[str, str]:
    """`law.<key>.log_error_disagrees`: parameters whose 95% intervals of the two estimators part."""
    tags = {}
    for name, fit in study.fits.items():
        if name in study.alternatives:
            disagreeing = parameters_disagree(fit, study.alternatives[name])
            tags[f"law.{metric_key(name)}.log_error_disagrees"] = ", ".join(sorted(disagreeing)) or "none"
    for name, reason in study.fit_failures.items():
        tags[f"law.{metric_key(name)}.failed"] = reason[:4000]  # a cross-check that failed says so
    return tags


def log_frontier(run: tracking.TrackedRun, table: pd.DataFrame, study: StudyFits) -> dict[str, str]:
    """Mark each usable trial's run on or off Q(C)'s frontier; the study run's tag lists those on it."""
    if study.q_c_frontier is None:
        return {}
    trials, _ = usable_trials(table)
    names = trials[TRIAL_PARAM].astype(str) if TRIAL_PARAM in trials.columns else trials.index.astype(str)
    if RUN_ID_COLUMN in trials.columns:
        for run_id, on in zip(trials[RUN_ID_COLUMN], study.q_c_frontier):
            if isinstance(run_id, str) and run_id:
                tracking.attach_run(run.tracking_uri, run_id).log_metrics({ON_FRONTIER_METRIC: float(on)}, step=0)
    on_frontier = [name for name, on in zip(names, study.q_c_frontier) if on]
    return {Q_C_FRONTIER_TAG: ", ".join(on_frontier)[:5000]}
