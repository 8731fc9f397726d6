"""A study child run's MLflow values as trial-table columns (sweeps.study.tracking's convention)."""

from __future__ import annotations

from typing import Any

import numpy as np

CONVERGED_KEY = "converged"


def evaluated_rankme(metrics: dict) -> float:
    """R of the scored checkpoint: `rankme` at the step Q was logged (studies before one name per
    quantity logged it as `eval_rankme`)."""
    if metrics.get("eval_rankme"):
        return metrics["eval_rankme"][-1][1]
    if not metrics.get("q") or not metrics.get("rankme"):
        return np.nan
    q_step = metrics["q"][-1][0]
    at_step = [value for step, value in metrics["rankme"] if step == q_step]
    return at_step[-1] if at_step else np.nan


def number(text: Any) -> float:
    """A logged parameter as a float; NaN when absent or not a number (a None logged as "null")."""
    try:
        return float(text)
    except (TypeError, ValueError):
        return np.nan


def rankme_pool_columns(params: dict, metrics: dict, tags: dict) -> dict[str, Any]:
    """N, pool and capped flag of the evaluation's R, and the pool and N training measured on."""
    return {
        "rankme_n": metrics["eval_rankme_n"][-1][1] if metrics.get("eval_rankme_n") else np.nan,
        "rankme_pool": tags.get("eval_rankme_pool", ""),
        "rankme_capped": str(tags.get("eval_rankme_capped", "")).lower() == "true",
        # The config logs `rankme_n` as asked (null: the default); the N the pool held is logged
        # once it is known, which MLflow keeps as `resumed_param.rankme_n` (params never change).
        "training_rankme_n": number(tags.get("resumed_param.rankme_n", params.get("rankme_n"))),
        "training_rankme_pool": params.get("rankme_pool", ""),
    }


def converged_flag(params: dict, metrics: dict, tags: dict) -> bool | None:
    """The run's `converged` flag from a metric, param or tag; None when it has none."""
    if metrics.get(CONVERGED_KEY):
        return bool(metrics[CONVERGED_KEY][-1][1])
    for source in (params, tags):
        if CONVERGED_KEY in source:
            return str(source[CONVERGED_KEY]).strip().lower() in {"true", "1", "1.0", "yes"}
    return None
