"""A study's fitted laws as MLflow metrics and tags: names MLflow accepts, intervals, and the
log-error cross-check's disagreements."""

from __future__ import annotations

import re

import numpy as np

from sweeps.report.fits import StudyFits, parameters_disagree
from sweeps.report.markdown import extrapolation_cell

__all__ = ["disagreement_tags", "law_metrics", "metric_key"]


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
    return {key: value for key, value in metrics.items() if key not in reasons}, reasons


def disagreement_tags(study: StudyFits) -> dict[str, str]:
    """`law.<key>.log_error_disagrees`: parameters whose 95% intervals of the two estimators part."""
    tags = {}
    for name, fit in study.fits.items():
        if name in study.alternatives:
            disagreeing = parameters_disagree(fit, study.alternatives[name])
            tags[f"law.{metric_key(name)}.log_error_disagrees"] = ", ".join(sorted(disagreeing)) or "none"
    return tags
