"""Scaling-law fits with uncertainty: Q(X), Q(N, D) and the Chinchilla loss law.

    fit = fit_saturating(rankme, q)          # Q(X) = Q_inf - (X_c / X)^alpha
    fit.params["alpha"], fit.ci["alpha"], fit.r2, fit.predict(rankme_new)

Each fit: a converged multi-start optimizer in log space (sweeps.laws.fit), percentile intervals
from a bootstrap that resamples configurations (all seeds of a configuration together), AICc and
BIC, and the leave-largest-out extrapolation error (fit without the largest scale, predict it).

    python -m sweeps.laws --study NAME [--tracking-uri URI] [--n-bootstrap 200]

refits a study's laws from its MLflow runs, without retraining, and logs them to the study run.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from sweeps.laws.fit import (
    FitNotConvergedError,
    LogSpaceProblem,
    Optimum,
    bootstrap_thetas,
    information_criteria,
    minimize_converged,
)
from sweeps.laws.forms import ChinchillaLaw, JointLaw, SaturatingLaw
from sweeps.report.early_prediction import pearson_early_prediction

__all__ = [
    "FitNotConvergedError",
    "LawFit",
    "fit_chinchilla",
    "fit_joint",
    "fit_saturating",
    "pearson_early_prediction",
]

MIN_POINTS = 5
CHINCHILLA_HUBER_DELTA = 1e-3


@dataclass(frozen=True, kw_only=True)
class FitDiagnostics:
    n_starts: int  # local optimizations from the start grid
    n_agreeing: int  # starts that reached the best objective
    projected_gradient: float  # at the optimum, on the rescaled objective
    n_bootstrap: int  # converged bootstrap replicates behind `ci`
    n_bootstrap_failed: int  # replicates dropped because their refit did not converge


@dataclass(frozen=True, kw_only=True)
class LawFit:
    """A fitted law: named parameters, intervals, goodness of fit, and prediction."""

    law: str
    params: dict[str, float]
    ci: dict[str, tuple[float, float]]  # bootstrap percentile interval at `ci_level`
    ci_level: float
    r2: float  # on the original scale (Q or loss)
    aicc: float  # from the log-space residuals
    bic: float
    extrapolation_error: float  # mean |prediction - observed| at the held-out largest scale; NaN: see note
    extrapolation_note: str  # why the error is NaN, or a caveat about it; "" when it needs none
    n_points: int
    diagnostics: FitDiagnostics
    replicates: pd.DataFrame = field(repr=False)  # one row of parameters per bootstrap replicate
    form: Any = field(repr=False)

    def predict(self, *inputs: np.ndarray) -> np.ndarray:
        """Q (or loss) at new inputs: `predict(x)` for saturating, `predict(n, d)` otherwise."""
        return self.form.predict(self.params, *inputs)

    def predict_interval(self, *inputs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Pointwise bootstrap percentile band (at `ci_level`) of the prediction; NaN without replicates."""
        if self.replicates.empty:
            nan = np.full(np.broadcast(*inputs).shape, np.nan)
            return nan, nan
        predictions = np.array(
            [self.form.predict(row, *inputs) for row in self.replicates.to_dict("records")]
        )
        tail = 100.0 * (1.0 - self.ci_level) / 2.0
        low, high = np.percentile(predictions, [tail, 100.0 - tail], axis=0)
        return low, high

    def to_dict(self) -> dict[str, Any]:
        return {
            "law": self.law,
            "params": dict(self.params),
            "ci": {k: list(v) for k, v in self.ci.items()},
            "ci_level": self.ci_level,
            "r2": self.r2,
            "aicc": self.aicc,
            "bic": self.bic,
            "extrapolation_error": self.extrapolation_error,
            "extrapolation_note": self.extrapolation_note,
            "n_points": self.n_points,
            "diagnostics": vars(self.diagnostics).copy(),
        }


def _as_vector(values: Any, name: str) -> np.ndarray:
    array = np.asarray(values, dtype=float).reshape(-1)
    if not np.all(np.isfinite(array)):
        bad = int(np.sum(~np.isfinite(array)))
        raise ValueError(f"{name} has {bad} non-finite value(s) (NaN or inf); drop or fix those trials first")
    return array


def validate_law_inputs(
    inputs: dict[str, Any], target_name: str, target: Any, *, quality: bool
) -> tuple[list[np.ndarray], np.ndarray]:
    columns = [_as_vector(v, k) for k, v in inputs.items()]
    y = _as_vector(target, target_name)
    for name, column in zip(inputs, columns):
        if len(column) != len(y):
            raise ValueError(
                f"{name} has {len(column)} values but {target_name} has {len(y)}; pass one per trial"
            )
        if np.any(column <= 0):
            raise ValueError(
                f"{name} must be positive (the law uses its logarithm); got min {column.min():g}"
            )
    if len(y) < MIN_POINTS:
        raise ValueError(
            f"need at least {MIN_POINTS} points to fit a scaling law, got {len(y)}; "
            "fewer cannot identify a 3-parameter law - run more configurations"
        )
    if quality and (np.any(y < 0) or np.any(y > 1)):
        raise ValueError(
            f"{target_name} must lie in [0, 1] (a HEAR-style score); got range [{y.min():g}, {y.max():g}]"
        )
    if quality and np.any(y == 1):
        raise ValueError(
            f"{target_name} contains 1.0: the fit works on the error 1 - {target_name}, which must be > 0"
        )
    if not quality and np.any(y <= 0):
        raise ValueError(f"{target_name} must be positive (fitted in log space); got min {y.min():g}")
    return columns, y


def _configuration_groups(columns: list[np.ndarray], groups: Any | None, n: int) -> np.ndarray:
    """Bootstrap units: the given groups, else points with identical inputs (seeds of one config)."""
    if groups is not None:
        labels = np.asarray(groups).reshape(-1)
        if len(labels) != n:
            raise ValueError(f"groups has {len(labels)} labels but there are {n} points")
        return np.unique(labels, return_inverse=True)[1]
    return np.unique(np.stack(columns, axis=1), axis=0, return_inverse=True)[1].reshape(-1)


def _fit(
    form: Any,
    columns: list[np.ndarray],
    y: np.ndarray,
    *,
    quality: bool,
    huber_delta: float | None,
    groups: np.ndarray,
    n_bootstrap: int,
    ci_level: float,
    extrapolate: bool,
    seed: int,
) -> LawFit:
    log_x = np.log(np.stack(columns, axis=1))  # (n, k)
    log_y = np.log(1.0 - y) if quality else np.log(y)
    problem = LogSpaceProblem(
        log_model=form.log_model, log_x=log_x, log_y=log_y, bounds=form.bounds(log_y), huber_delta=huber_delta
    )
    optimum = _converged_optimum(form, problem, seed)
    params = form.params_from_theta(optimum.theta)

    thetas, n_failed = bootstrap_thetas(
        problem, optimum.theta, groups=groups, bounds_for=form.bounds, n_resamples=n_bootstrap, seed=seed
    )
    tail = 100.0 * (1.0 - ci_level) / 2.0
    ci = {}
    replicate_params = pd.DataFrame(
        [form.params_from_theta(t) for t in thetas], columns=list(form.param_names)
    )
    if len(thetas):
        for name in form.param_names:
            low, high = np.percentile(replicate_params[name], [tail, 100.0 - tail])
            ci[name] = (float(low), float(high))

    prediction = form.predict(params, *columns)
    r2 = 1.0 - float(np.sum((y - prediction) ** 2) / np.sum((y - y.mean()) ** 2))
    aicc, bic = information_criteria(problem.residuals(optimum.theta), len(optimum.theta))
    if extrapolate:
        extrapolation_error, extrapolation_note = _leave_largest_out(
            form, columns, y, quality=quality, huber_delta=huber_delta, seed=seed
        )
    else:
        extrapolation_error, extrapolation_note = float("nan"), "not computed: extrapolation was switched off"
    return LawFit(
        law=form.name,
        params=params,
        ci=ci,
        ci_level=ci_level,
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
    log_y = np.log(1.0 - y[~held_out]) if quality else np.log(y[~held_out])
    problem = LogSpaceProblem(
        log_model=form.log_model,
        log_x=np.log(np.stack(kept, axis=1)),
        log_y=log_y,
        bounds=form.bounds(log_y),
        huber_delta=huber_delta,
    )
    optimum = minimize_converged(problem, form.start_grid(problem.log_x, log_y), seed=seed)
    prediction = form.predict(form.params_from_theta(optimum.theta), *[c[held_out] for c in columns])
    note = (
        ""
        if optimum.converged
        else f"caution: the refit without the largest scale did not converge (projected gradient "
        f"{optimum.projected_gradient:.1e}, {optimum.n_agreeing} of {optimum.n_starts} starts agree)"
    )
    return float(np.mean(np.abs(prediction - y[held_out]))), note


def fit_saturating(
    x: Any,
    q: Any,
    *,
    groups: Any | None = None,
    huber_delta: float | None = None,
    n_bootstrap: int = 200,
    ci_level: float = 0.95,
    extrapolate: bool = True,
    seed: int = 0,
) -> LawFit:
    """Fit Q(X) = Q_inf - (X_c / X)^alpha; X is RankMe, N, D or C (positive), Q in [0, 1)."""
    (column,), y = validate_law_inputs({"x": x}, "q", q, quality=True)
    return _fit(
        SaturatingLaw(),
        [column],
        y,
        quality=True,
        huber_delta=huber_delta,
        groups=_configuration_groups([column], groups, len(y)),
        n_bootstrap=n_bootstrap,
        ci_level=ci_level,
        extrapolate=extrapolate,
        seed=seed,
    )


def fit_joint(
    n: Any,
    d: Any,
    q: Any,
    *,
    groups: Any | None = None,
    huber_delta: float | None = None,
    n_bootstrap: int = 200,
    ci_level: float = 0.95,
    extrapolate: bool = True,
    seed: int = 0,
) -> LawFit:
    """Fit Q(N, D) = 1 - [(1-Q_inf)^(1/alpha) + (N_C/N)^(alpha_N/alpha) + (D_C/D)^(alpha_D/alpha)]^alpha."""
    columns, y = validate_law_inputs({"n": n, "d": d}, "q", q, quality=True)
    return _fit(
        JointLaw(),
        columns,
        y,
        quality=True,
        huber_delta=huber_delta,
        groups=_configuration_groups(columns, groups, len(y)),
        n_bootstrap=n_bootstrap,
        ci_level=ci_level,
        extrapolate=extrapolate,
        seed=seed,
    )


def fit_chinchilla(
    n: Any,
    d: Any,
    loss: Any,
    *,
    groups: Any | None = None,
    huber_delta: float | None = CHINCHILLA_HUBER_DELTA,
    n_bootstrap: int = 200,
    ci_level: float = 0.95,
    extrapolate: bool = True,
    seed: int = 0,
) -> LawFit:
    """Fit L(N, D) = E + A/N^alpha + B/D^beta with a Huber loss on log L (delta 1e-3 by default)."""
    columns, y = validate_law_inputs({"n": n, "d": d}, "loss", loss, quality=False)
    return _fit(
        ChinchillaLaw(),
        columns,
        y,
        quality=False,
        huber_delta=huber_delta,
        groups=_configuration_groups(columns, groups, len(y)),
        n_bootstrap=n_bootstrap,
        ci_level=ci_level,
        extrapolate=extrapolate,
        seed=seed,
    )
