"""A converged multi-start optimizer and a configuration bootstrap for log-space law fits.

Every law is fitted as `log y ~ log_model(theta, log x)`: residuals in log space keep a law's
small and large scales equally weighted, and a log-sum-exp parametrisation keeps every term
positive without constraints. What makes a fit trustworthy is the optimizer, not the law:

- the objective is a sum (never a mean) of per-point losses, rescaled so the best grid start
  scores 1: L-BFGS-B's relative-reduction test divides by max(|f|, 1), so a tiny objective
  (a mean Huber loss with delta 1e-3 is ~1e-6) stops it after a handful of steps - the artefact
  behind the originally published Chinchilla fit;
- tolerances are tight, the best result is restarted until it stops improving (a restart resets
  L-BFGS-B's curvature memory, which is what catches a stall in a flat valley), and the result is
  accepted only if its projected gradient is near zero and at least two starts agree on it.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from scipy.optimize import minimize
from threadpoolctl import ThreadpoolController

# (theta (..., p), log_x (n, k)) -> (log prediction (..., n), jacobian (..., n, p))
LogModel = Callable[[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]
Bounds = list[tuple[float | None, float | None]]

# On the rescaled objective. Loose enough for Huber fits, whose curvature jumps where a residual
# crosses delta (the line search then stops ~1e-5 short with the objective settled to 1e-15);
# the restart test in `_polish` is what rejects a stall in a flat valley.
GRADIENT_TOLERANCE = 1e-4
# Two optima are "the same" when their objectives agree to this relative precision.
AGREEMENT_RTOL = 1e-6
TIGHT_OPTIONS = {"ftol": 1e-15, "gtol": 1e-10, "maxiter": 20_000, "maxfun": 40_000, "maxcor": 20}


class FitNotConvergedError(RuntimeError):
    """The optimizer could not reach a point with a near-zero gradient."""


@dataclass(frozen=True, kw_only=True)
class LogSpaceProblem:
    """Minimise sum_i loss(log_model(theta, log_x)_i - log_y_i) within `bounds`."""

    log_model: LogModel
    log_x: np.ndarray  # (n, k)
    log_y: np.ndarray  # (n,)
    bounds: Bounds
    huber_delta: float | None  # None: squared loss

    def residuals(self, theta: np.ndarray) -> np.ndarray:
        prediction, _ = self.log_model(np.asarray(theta, dtype=float), self.log_x)
        return prediction - self.log_y

    def batch_objective(self, thetas: np.ndarray) -> np.ndarray:
        """Unscaled objective for many parameter vectors at once: (m, p) -> (m,)."""
        prediction, _ = self.log_model(thetas, self.log_x)  # (m, n)
        return robust_loss(prediction - self.log_y, self.huber_delta)[0].sum(axis=-1)

    def objective_and_gradient(self, theta: np.ndarray, scale: float) -> tuple[float, np.ndarray]:
        prediction, jacobian = self.log_model(theta, self.log_x)  # (n,), (n, p)
        loss, dloss = robust_loss(prediction - self.log_y, self.huber_delta)
        return float(loss.sum() * scale), (dloss @ jacobian) * scale

    def subset(self, indices: np.ndarray, bounds: Bounds) -> LogSpaceProblem:
        return LogSpaceProblem(
            log_model=self.log_model,
            log_x=self.log_x[indices],
            log_y=self.log_y[indices],
            bounds=bounds,
            huber_delta=self.huber_delta,
        )


@dataclass(frozen=True, kw_only=True)
class Optimum:
    theta: np.ndarray
    objective: float  # rescaled: the best grid start scores 1
    projected_gradient: float  # max-abs, on the rescaled objective
    n_starts: int  # local optimizations run
    n_agreeing: int  # of them (plus perturbed restarts) reaching the best objective
    converged: bool


def robust_loss(residuals: np.ndarray, huber_delta: float | None) -> tuple[np.ndarray, np.ndarray]:
    """Per-point loss and its derivative: 0.5 r^2, or Huber with threshold `huber_delta`."""
    if huber_delta is None:
        return 0.5 * residuals**2, residuals
    magnitude = np.abs(residuals)
    quadratic = magnitude <= huber_delta
    loss = np.where(quadratic, 0.5 * residuals**2, huber_delta * (magnitude - 0.5 * huber_delta))
    return loss, np.clip(residuals, -huber_delta, huber_delta)


def log_sum_exp_terms(terms: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """log(sum(exp(terms))) over the first axis, and each term's softmax weight (its gradient)."""
    peak = terms.max(axis=0)
    exponentials = np.exp(terms - peak)
    total = exponentials.sum(axis=0)
    return peak + np.log(total), exponentials / total


def projected_gradient(theta: np.ndarray, gradient: np.ndarray, bounds: Bounds) -> float:
    """Max-abs gradient, ignoring components that push against an active bound."""
    projected = np.array(gradient, dtype=float)
    for i, (low, high) in enumerate(bounds):
        if low is not None and theta[i] <= low + 1e-12 and projected[i] > 0:
            projected[i] = 0.0
        if high is not None and theta[i] >= high - 1e-12 and projected[i] < 0:
            projected[i] = 0.0
    return float(np.abs(projected).max())


def clip_to_bounds(theta: np.ndarray, bounds: Bounds) -> np.ndarray:
    low = np.array([-np.inf if b[0] is None else b[0] for b in bounds])
    high = np.array([np.inf if b[1] is None else b[1] for b in bounds])
    return np.clip(theta, low, high)


@functools.cache
def _thread_pools() -> ThreadpoolController:
    """The process's BLAS and OpenMP pools, found once: finding them reads /proc/self/maps, 3 ms in a
    process that has loaded torch, which a fresh `threadpool_limits` per local fit paid ~3,800 times
    per study (12.7 s of a 75 s analysis under cProfile). numpy's and scipy's BLAS, the only ones
    L-BFGS-B uses, are loaded with this module's imports, so none can be missed."""
    return ThreadpoolController()


def _local_minimize(problem: LogSpaceProblem, start: np.ndarray, scale: float) -> tuple[np.ndarray, float]:
    # L-BFGS-B's tiny matrix products run 10-40x slower with multi-threaded BLAS on a busy machine.
    with _thread_pools().limit(limits=1):
        return _lbfgsb(problem, start, scale)


def _lbfgsb(problem: LogSpaceProblem, start: np.ndarray, scale: float) -> tuple[np.ndarray, float]:
    result = minimize(
        problem.objective_and_gradient,
        clip_to_bounds(start, problem.bounds),
        args=(scale,),
        jac=True,
        method="L-BFGS-B",
        bounds=problem.bounds,
        options=TIGHT_OPTIONS,
    )
    return result.x, float(result.fun)


def _polish(problem: LogSpaceProblem, theta: np.ndarray, value: float, scale: float) -> tuple[np.ndarray, float, bool]:
    """Restart from the best point until a restart no longer lowers the objective.

    Returns (theta, value, settled); settled is False if the fifth restart still improved.
    """
    for _ in range(5):
        new_theta, new_value = _local_minimize(problem, theta, scale)
        improved = new_value < value - 1e-9 * max(abs(value), 1e-12)
        if new_value <= value:
            theta, value = new_theta, new_value
        if not improved:
            return theta, value, True
    return theta, value, False


def minimize_converged(problem: LogSpaceProblem, starts: np.ndarray, *, n_local: int = 16, seed: int = 0) -> Optimum:
    """Multi-start L-BFGS-B from the `n_local` best of `starts` (m, p), polished and checked."""
    starts = np.array([clip_to_bounds(s, problem.bounds) for s in np.atleast_2d(starts)])
    grid_values = problem.batch_objective(starts)
    finite = np.isfinite(grid_values)
    if not finite.any():
        raise FitNotConvergedError("the objective is not finite at any start; check the inputs")
    scale = 1.0 / max(float(grid_values[finite].min()), 1e-300)
    chosen = np.argsort(np.where(finite, grid_values, np.inf))[: min(n_local, int(finite.sum()))]
    local = [_local_minimize(problem, starts[i], scale) for i in chosen]
    values = np.array([value for _, value in local])
    best_theta, best_value = local[int(np.argmin(values))]
    best_theta, best_value, settled = _polish(problem, best_theta, best_value, scale)

    def agrees(value: float) -> bool:
        return abs(value - best_value) <= AGREEMENT_RTOL * max(abs(best_value), 1e-12)

    n_agreeing = sum(agrees(v) for v in values)
    if n_agreeing < 2:
        # Perturbed restarts: a genuine minimum draws nearby starts back to itself.
        rng = np.random.default_rng(seed)
        for _ in range(6):
            jitter = rng.normal(0.0, 0.05, size=best_theta.shape) * np.maximum(np.abs(best_theta), 0.1)
            theta, value = _local_minimize(problem, best_theta + jitter, scale)
            if value < best_value and not agrees(value):
                best_theta, best_value, settled = _polish(problem, theta, value, scale)
                n_agreeing = 1
            else:
                n_agreeing += agrees(value)
    _, gradient = problem.objective_and_gradient(best_theta, scale)
    gradient_size = projected_gradient(best_theta, gradient, problem.bounds)
    return Optimum(
        theta=best_theta,
        objective=best_value,
        projected_gradient=gradient_size,
        n_starts=len(local),
        n_agreeing=int(n_agreeing),
        converged=settled and gradient_size <= GRADIENT_TOLERANCE and n_agreeing >= 2,
    )


def refit_from(problem: LogSpaceProblem, theta: np.ndarray) -> tuple[np.ndarray, bool]:
    """One converged local fit from a known good point (bootstrap replicates, profiles)."""
    theta = clip_to_bounds(theta, problem.bounds)
    start_value, _ = problem.objective_and_gradient(theta, 1.0)
    scale = 1.0 / max(start_value, 1e-300)
    theta, _, settled = _polish(problem, theta, 1.0, scale)
    _, gradient = problem.objective_and_gradient(theta, scale)
    return theta, settled and projected_gradient(theta, gradient, problem.bounds) <= GRADIENT_TOLERANCE


def resample_groups(groups: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Indices of a bootstrap sample that draws whole groups (all seeds of a configuration)."""
    unique_groups, inverse = np.unique(groups, return_inverse=True)
    members = [np.flatnonzero(inverse == g) for g in range(len(unique_groups))]
    drawn = rng.integers(0, len(unique_groups), size=len(unique_groups))
    return np.concatenate([members[g] for g in drawn])


def r_squared(y: np.ndarray, prediction: np.ndarray) -> float:
    """Paper App. E, Formula (8): R^2 = 1 - RSS / TSS on the original scale. NaN when y does not vary
    (e.g. every trial scored the same Q): the formula is undefined there, and -inf (what the bare
    division gives) would read as a measured, infinitely bad fit. Tested on the values, not on TSS:
    the mean of three 0.1s is not exactly 0.1, which leaves a TSS of 6e-34 and an R^2 of -3e29."""
    y, prediction = np.asarray(y, dtype=float), np.asarray(prediction, dtype=float)
    if np.ptp(y) == 0.0:
        return float("nan")
    return 1.0 - float(np.sum((y - prediction) ** 2)) / float(np.sum((y - y.mean()) ** 2))


def information_criteria(log_residuals: np.ndarray, n_params: int) -> tuple[float, float]:
    """(AICc, BIC) from the Gaussian likelihood of the log-space residuals."""
    n = len(log_residuals)
    rss = max(float(np.sum(log_residuals**2)), 1e-300)
    log_likelihood_term = n * np.log(rss / n)
    bic = log_likelihood_term + n_params * np.log(n)
    if n - n_params - 1 <= 0:
        return float("inf"), float(bic)
    aicc = log_likelihood_term + 2 * n_params + 2 * n_params * (n_params + 1) / (n - n_params - 1)
    return float(aicc), float(bic)


def bootstrap_thetas(
    problem: LogSpaceProblem,
    theta_hat: np.ndarray,
    *,
    groups: np.ndarray,
    bounds_for: Callable[[np.ndarray], Bounds],
    n_resamples: int,
    seed: int,
) -> tuple[np.ndarray, int]:
    """Refit on `n_resamples` group resamples from the full fit; (thetas (m, p), n_failed).

    Replicates whose refit does not converge are dropped and counted, never silently averaged in.
    """
    rng = np.random.default_rng(seed)
    thetas, n_failed = [], 0
    for _ in range(n_resamples):
        indices = resample_groups(groups, rng)
        replicate = problem.subset(indices, bounds_for(problem.log_y[indices]))
        theta, converged = refit_from(replicate, theta_hat)
        if converged:
            thetas.append(theta)
        else:
            n_failed += 1
    return np.array(thetas).reshape(-1, len(theta_hat)), n_failed
