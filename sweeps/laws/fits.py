"""Scaling-law fits with uncertainty: Q(X), Q(N, D) and the Chinchilla loss law.

    fit = fit_saturating(rankme, q)          # Q(X) = Q_inf - (X_c / X)^alpha
    fit.params["alpha"], fit.ci["alpha"], fit.r2, fit.predict(rankme_new)

Two estimators for the quality laws (FitSettings.estimator):
- "reference" (default): the study's own, paper App. E: least squares on Q, Q_inf in [0, 1],
  other parameters > 0 (sweeps.laws.reference);
- "log_error": the robust alternative: least squares (or Huber) on log(1 - Q), Q_inf at least
  the best observed Q, exponents <= 2 (sweeps.laws.forms).

Each fit: a converged multi-start optimizer (sweeps.laws.optimizer), percentile intervals
from a bootstrap that resamples configurations (all seeds of a configuration together), AICc and
BIC, and the leave-largest-out extrapolation error (fit without the largest scale, predict it).

    python -m sweeps.laws --study NAME [--tracking-uri URI] [--n-bootstrap 200]

refits a study's laws from its MLflow runs, without retraining, and logs them to the study run.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from sweeps.laws.forms import ChinchillaLaw, JointLaw, SaturatingLaw
from sweeps.laws.inputs import MIN_POINTS, configuration_groups, validate_law_inputs
from sweeps.laws.optimizer import (
    FitNotConvergedError,
    LogSpaceProblem,
    Optimum,
    bootstrap_thetas,
    information_criteria,
    minimize_converged,
    r_squared,
)
from sweeps.laws.reference import QSpaceLaw
from sweeps.laws.result import FitDiagnostics, LawFit

__all__ = [
    "CHINCHILLA_HUBER_DELTA",
    "FitNotConvergedError",
    "FitSettings",
    "LawFit",
    "fit_chinchilla",
    "fit_joint",
    "fit_saturating",
    "validate_law_inputs",
]

CHINCHILLA_HUBER_DELTA = 1e-3  # Hoffmann et al. (2022), approach 3: Huber loss on log L, delta 1e-3
REFERENCE = "reference"  # paper App. E: least squares on Q
LOG_ERROR = "log_error"  # the robust alternative on log(1 - Q)
ESTIMATORS = (REFERENCE, LOG_ERROR)


@dataclass(frozen=True, kw_only=True)
class FitSettings:
    """How a law is fitted, the keyword arguments every `fit_*` function takes besides `groups`."""

    huber_delta: float | None = None  # Huber loss on the log residuals; None: least squares
    n_bootstrap: int = 200  # configuration resamples behind the intervals; 0: no intervals
    ci_level: float = 0.95
    extrapolate: bool = True  # also refit without the largest scale and predict it
    seed: int = 0
    estimator: str = REFERENCE  # quality laws only: REFERENCE or LOG_ERROR (the loss law is log-space)

    def __post_init__(self) -> None:
        if self.estimator not in ESTIMATORS:
            raise ValueError(f"estimator must be one of {ESTIMATORS}, got {self.estimator!r}")


def _log_space_problem(
    form: Any, columns: list[np.ndarray], y: np.ndarray, *, quality: bool, huber_delta: float | None
) -> LogSpaceProblem:
    """Reference forms on Q itself; otherwise quality laws on log(1 - Q), loss laws on log L."""
    if form.space == "q":
        log_y = y
    else:
        log_y = np.log(1.0 - y) if quality else np.log(y)
    return LogSpaceProblem(
        log_model=form.log_model,
        log_x=np.log(np.stack(columns, axis=1)),  # (n, k)
        log_y=log_y,
        bounds=form.bounds(log_y),
        huber_delta=huber_delta,
    )


def _bootstrap_intervals(
    form: Any, thetas: np.ndarray, ci_level: float
) -> tuple[pd.DataFrame, dict[str, tuple[float, float]]]:
    """(one row of parameters per replicate, percentile interval per parameter; empty without replicates)."""
    replicate_params = pd.DataFrame([form.params_from_theta(t) for t in thetas], columns=list(form.param_names))
    tail = 100.0 * (1.0 - ci_level) / 2.0
    ci = {}
    if len(thetas):
        for name in form.param_names:
            low, high = np.percentile(replicate_params[name], [tail, 100.0 - tail])
            ci[name] = (float(low), float(high))
    return replicate_params, ci


def _fit(
    form: Any, columns: list[np.ndarray], y: np.ndarray, *, quality: bool, groups: np.ndarray, settings: FitSettings
) -> LawFit:
    problem = _log_space_problem(form, columns, y, quality=quality, huber_delta=settings.huber_delta)
    optimum = _converged_optimum(form, problem, settings.seed)
    params = form.params_from_theta(optimum.theta)
    thetas, n_failed = bootstrap_thetas(
        problem,
        optimum.theta,
        groups=groups,
        bounds_for=form.bounds,
        n_resamples=settings.n_bootstrap,
        seed=settings.seed,
    )
    replicate_params, ci = _bootstrap_intervals(form, thetas, settings.ci_level)
    prediction = form.predict(params, *columns)
    r2 = r_squared(y, prediction)  # paper App. E, Formula (8), on Q (or the loss) itself
    aicc, bic = information_criteria(problem.residuals(optimum.theta), len(optimum.theta))
    if settings.extrapolate:
        extrapolation_error, extrapolation_note = _leave_largest_out(
            form, columns, y, quality=quality, huber_delta=settings.huber_delta, seed=settings.seed
        )
    else:
        extrapolation_error, extrapolation_note = float("nan"), "not computed: extrapolation was switched off"
    return LawFit(
        law=form.name,
        estimator=form_estimator(form),
        params=params,
        ci=ci,
        ci_level=settings.ci_level,
        r2=r2,
        aicc=aicc,
        bic=bic,
        extrapolation_error=extrapolation_error,
        extrapolation_note=extrapolation_note,
        n_points=len(y),
        diagnostics=FitDiagnostics(
            n_starts=optimum.n_starts,
            n_agreeing=optimum.n_agreeing,
            projected_gradient=optimum.projected_gradient,
            n_bootstrap=len(thetas),
            n_bootstrap_failed=n_failed,
        ),
        replicates=replicate_params,
        form=form,
    )


def _converged_optimum(form: Any, problem: LogSpaceProblem, seed: int) -> Optimum:
    optimum = minimize_converged(problem, form.start_grid(problem.log_x, problem.log_y), seed=seed)
    if not optimum.converged:
        raise FitNotConvergedError(
            f"{form.name} fit did not converge: projected gradient {optimum.projected_gradient:.2e}, "
            f"{optimum.n_agreeing} of {optimum.n_starts} starts agree on the best optimum"
        )
    return optimum


def _leave_largest_out(
    form: Any,
    columns: list[np.ndarray],
    y: np.ndarray,
    *,
    quality: bool,
    huber_delta: float | None,
    seed: int,
) -> tuple[float, str]:
    """Fit without the points at the largest scale (largest X, or largest N*D); (error there, note).

    The note says why the error is NaN (too few points left) or flags a refit that did not converge.
    """
    scale = np.prod(np.stack(columns, axis=1), axis=1)
    held_out = scale == scale.max()
    n_left = int(np.sum(~held_out))
    if n_left < MIN_POINTS:
        return float("nan"), (
            f"not computed: {n_left} points remain after leaving out the largest scale "
            f"({int(held_out.sum())} point(s)), fits need >= {MIN_POINTS}"
        )
    kept = [c[~held_out] for c in columns]
    problem = _log_space_problem(form, kept, y[~held_out], quality=quality, huber_delta=huber_delta)
    optimum = minimize_converged(problem, form.start_grid(problem.log_x, problem.log_y), seed=seed)
    prediction = form.predict(form.params_from_theta(optimum.theta), *[c[held_out] for c in columns])
    note = (
        ""
        if optimum.converged
        else f"caution: the refit without the largest scale did not converge (projected gradient "
        f"{optimum.projected_gradient:.1e}, {optimum.n_agreeing} of {optimum.n_starts} starts agree)"
    )
    return float(np.mean(np.abs(prediction - y[held_out]))), note


def _fit_law(
    form: Any,
    inputs: dict[str, Any],
    target_name: str,
    target: Any,
    *,
    quality: bool,
    groups: Any | None,
    **settings: Any,
) -> LawFit:
    """Validate the inputs, group the points into bootstrap units, fit `form`; `settings`: FitSettings' fields."""
    columns, y = validate_law_inputs(inputs, target_name, target, quality=quality)
    units = configuration_groups(columns, groups, len(y))
    fit_settings = FitSettings(**settings)
    if quality and fit_settings.estimator == REFERENCE:
        form = QSpaceLaw(form)
    return _fit(form, columns, y, quality=quality, groups=units, settings=fit_settings)


def form_estimator(form: Any) -> str:
    """Which estimator a form stands for: the reference on Q, or a log-space fit."""
    if form.space == "q":
        return REFERENCE
    return LOG_ERROR if form.name in ("saturating", "joint") else "log_loss"


def fit_saturating(x: Any, q: Any, *, groups: Any | None = None, **settings: Any) -> LawFit:
    """Fit Q(X) = Q_inf - (X_c / X)^alpha; X is RankMe, N, D or C (positive), Q in [0, 1).

    `groups`: bootstrap unit per point (default: points with identical inputs); `settings`: the
    fields of FitSettings (huber_delta, n_bootstrap, ci_level, extrapolate, seed, estimator).
    """
    return _fit_law(SaturatingLaw(), {"x": x}, "q", q, quality=True, groups=groups, **settings)


def fit_joint(n: Any, d: Any, q: Any, *, groups: Any | None = None, **settings: Any) -> LawFit:
    """Fit Q(N, D) = 1 - [(1-Q_inf)^(1/alpha) + (N_C/N)^(alpha_N/alpha) + (D_C/D)^(alpha_D/alpha)]^alpha.

    `groups` and `settings` as for fit_saturating.
    """
    return _fit_law(JointLaw(), {"n": n, "d": d}, "q", q, quality=True, groups=groups, **settings)


def fit_chinchilla(n: Any, d: Any, loss: Any, *, groups: Any | None = None, **settings: Any) -> LawFit:
    """Fit L(N, D) = E + A/N^alpha + B/D^beta with a Huber loss on log L (delta 1e-3 by default).

    `groups` and `settings` as for fit_saturating; huber_delta defaults to CHINCHILLA_HUBER_DELTA.
    """
    settings = {"huber_delta": CHINCHILLA_HUBER_DELTA, **settings}
    return _fit_law(ChinchillaLaw(), {"n": n, "d": d}, "loss", loss, quality=False, groups=groups, **settings)
