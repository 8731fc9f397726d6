"""Q(C) as an upper envelope: the curve no run surpasses (paper Sec. IV-E, Eq. 6, Fig. 5a).

The paper reads Fig. 5a's dashed line as "the computational efficiency frontier": none of the runs
lies above it. A least-squares fit to the frontier points (each the best Q reached at or below its
compute) passes below some of them, because least squares balances points on both sides. The
envelope estimator keeps Eq. 6 and least squares on Q over the frontier points (App. E's
objective and bounds) but adds one constraint per run, frontier or not:

    Q_inf - (C_c / C_j)^alpha >= Q_j - ENVELOPE_TOLERANCE    for every run j,

solved by SLSQP from the least-squares optimum and from that optimum lifted until it is feasible.
The intervals come from a bootstrap of the whole estimator: resample configurations, re-pick the
frontier among the drawn runs, refit the constrained curve.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pandas as pd
from scipy.optimize import minimize

from sweeps.laws.fits import fit_saturating
from sweeps.laws.frontier import frontier_mask
from sweeps.laws.inputs import MIN_POINTS, configuration_groups
from sweeps.laws.optimizer import FitNotConvergedError, information_criteria, r_squared, resample_groups
from sweeps.laws.result import LawFit

ENVELOPE = "envelope"
# Q units: a run may stand this far above the curve (a tenth of a point of accuracy, well under
# the test-clip interval of any study so far) so that the constraint does not fight float noise.
ENVELOPE_TOLERANCE = 1e-3


def _theta_from_params(params: dict[str, float]) -> np.ndarray:
    """SaturatingLaw's theta (log(1 - Q_inf), alpha log C_c, alpha) from named parameters."""
    alpha = params["alpha"]
    return np.array([np.log(max(1.0 - params["q_inf"], 1e-300)), alpha * np.log(params["x_c"]), alpha])


def _lifted(form: Any, theta: np.ndarray, log_x: np.ndarray, q: np.ndarray, tolerance: float) -> np.ndarray:
    """`theta` with Q_inf raised just enough that the curve clears every point (a feasible start)."""
    shortfall = float(np.max(q - tolerance - form.log_model(theta, log_x)[0]))
    if shortfall <= 0:
        return theta
    error = np.exp(theta[0]) - shortfall - 1e-9
    return theta if error <= 0 else np.concatenate([[np.log(error)], theta[1:]])


def constrained_theta(
    form: Any, start: np.ndarray, log_x: np.ndarray, q: np.ndarray, on_frontier: np.ndarray, tolerance: float
) -> np.ndarray | None:
    """Least squares over the frontier points with every point below the curve (within
    `tolerance`); None when neither start reaches a feasible optimum."""
    fit_x, fit_q = log_x[on_frontier], q[on_frontier]
    scale = 1.0 / max(float(np.var(fit_q)) * len(fit_q), 1e-12)

    def objective(theta: np.ndarray) -> tuple[float, np.ndarray]:
        q_hat, jacobian = form.log_model(theta, fit_x)
        residual = q_hat - fit_q
        return scale * float(residual @ residual), scale * 2.0 * (jacobian.T @ residual)

    constraint = {
        "type": "ineq",
        "fun": lambda theta: form.log_model(theta, log_x)[0] - (q - tolerance),
        "jac": lambda theta: form.log_model(theta, log_x)[1],
    }
    bounds = [(low, high) for low, high in form.bounds(q)]
    best, best_value = None, np.inf
    for begin in (start, _lifted(form, start, log_x, q, tolerance)):
        result = minimize(
            objective, begin, jac=True, method="SLSQP", bounds=bounds, constraints=[constraint],
            options={"maxiter": 1000, "ftol": 1e-12},
        )  # fmt: skip
        feasible = np.min(form.log_model(result.x, log_x)[0] - q) >= -tolerance - 1e-7
        if feasible and np.isfinite(result.fun) and result.fun < best_value:
            best, best_value = result.x, float(result.fun)
    return best


def _bootstrap(form, theta, log_x, q, compute, groups, n_resamples, seed, tolerance) -> tuple[np.ndarray, int]:
    """Constrained refits on configuration resamples, the frontier re-picked in each; (thetas, failed)."""
    rng = np.random.default_rng(seed)
    thetas, failed = [], 0
    for _ in range(n_resamples):
        drawn = resample_groups(groups, rng)
        on_frontier = frontier_mask(compute[drawn], q[drawn])
        refit = None
        if on_frontier.sum() >= MIN_POINTS:
            refit = constrained_theta(form, theta, log_x[drawn], q[drawn], on_frontier, tolerance)
        if refit is None:
            failed += 1
        else:
            thetas.append(refit)
    return np.array(thetas).reshape(-1, len(theta)), failed


def _leave_largest_out(form, theta, compute, q, tolerance) -> tuple[float, str]:
    """Refit without the runs at the largest compute; |prediction - best Q there|."""
    held_out = compute == compute.max()
    kept_c, kept_q = compute[~held_out], q[~held_out]
    on_frontier = frontier_mask(kept_c, kept_q)
    if on_frontier.sum() < MIN_POINTS:
        return float("nan"), f"not computed: {int(on_frontier.sum())} frontier points remain without the largest C"
    refit = constrained_theta(form, theta, np.log(kept_c)[:, None], kept_q, on_frontier, tolerance)
    if refit is None:
        return float("nan"), "not computed: the envelope refit without the largest C found no feasible curve"
    prediction = form.log_model(refit, np.log(compute[held_out][:1])[:, None])[0][0]
    return float(abs(prediction - q[held_out].max())), ""


def fit_envelope(
    compute: Any,
    q: Any,
    *,
    groups: Any | None = None,
    n_bootstrap: int = 200,
    ci_level: float = 0.95,
    seed: int = 0,
    tolerance: float = ENVELOPE_TOLERANCE,
) -> LawFit:
    """Eq. 6 as the upper envelope of every run: least squares over the frontier points with no
    run above the curve by more than `tolerance`. `compute` and `q` hold every run (not only the
    frontier); `groups` is the bootstrap unit (default: runs with equal compute)."""
    compute, q = np.asarray(compute, dtype=float), np.asarray(q, dtype=float)
    on_frontier = frontier_mask(compute, q)
    units = configuration_groups([compute], groups, len(q))
    start = fit_saturating(compute[on_frontier], q[on_frontier], groups=units[on_frontier], n_bootstrap=0, seed=seed)
    form, log_x = start.form, np.log(compute)[:, None]
    theta = constrained_theta(form, _theta_from_params(start.params), log_x, q, on_frontier, tolerance)
    if theta is None:
        raise FitNotConvergedError("Q(C) envelope: no Eq. 6 curve lies above every run (SLSQP found none)")
    thetas, failed = _bootstrap(form, theta, log_x, q, compute, units, n_bootstrap, seed, tolerance)
    replicates = [form.params_from_theta(t) for t in thetas]
    tail = 100.0 * (1.0 - ci_level) / 2.0
    ci = {
        name: tuple(float(v) for v in np.percentile([r[name] for r in replicates], [tail, 100.0 - tail]))
        for name in form.param_names
        if replicates
    }
    fit_q = q[on_frontier]
    prediction = form.log_model(theta, log_x[on_frontier])[0]
    r2 = r_squared(fit_q, prediction)  # paper App. E, Formula (8)
    aicc, bic = information_criteria(fit_q - prediction, len(theta))
    error, note = _leave_largest_out(form, theta, compute, q, tolerance)
    return dataclasses.replace(
        start, estimator=ENVELOPE, params=form.params_from_theta(theta), ci=ci, ci_level=ci_level, r2=r2,
        aicc=aicc, bic=bic, extrapolation_error=error, extrapolation_note=note,
        diagnostics=dataclasses.replace(start.diagnostics, n_bootstrap=len(thetas), n_bootstrap_failed=failed),
        replicates=pd.DataFrame(replicates, columns=list(form.param_names)),
    )  # fmt: skip


def envelope_shortfall(fit: LawFit, compute: Any, q: Any) -> float:
    """How far the highest run stands above the fitted curve (<= tolerance for an envelope)."""
    return float(np.max(np.asarray(q, float) - fit.predict(np.asarray(compute, float))))
