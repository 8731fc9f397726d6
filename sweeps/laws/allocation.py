"""Compute-optimal allocation: the model size N and data D a compute budget C should buy.

Two cases:
- **The loss law** L(N, D) = E + A / N^alpha + B / D^beta with C = 6 N D (Hoffmann et al. 2022,
  Eq. 4 and App. D.2): N_opt = G (C / 6)^a and D_opt = G^-1 (C / 6)^b, a = beta / (alpha + beta),
  b = alpha / (alpha + beta), G = (alpha A / (beta B))^(1 / (alpha + beta)).
- **A quality law** Q(N, D) (sweeps.laws.forms.JointLaw, D in hours) under C = FLOPs per sample x
  samples, each sample (a 10 s clip, App. B's length, or the model's crop) of D seen once, as
  Chinchilla counts tokens seen once:
  the N that maximises Q(N, C / (f(N) x samples per hour)) along the iso-compute curve, searched on a
  fine grid of log N and refined; f(N) is the family's training FLOPs per sample, a power law fitted
  to the study's own models (`FlopsPerSample`).

Allocation exponents of a quality law are local: the slopes of log N_opt and log D_opt against
log C between C / sqrt(10) and C x sqrt(10).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from scipy.optimize import minimize_scalar

CLIP_SECONDS = 10.0  # App. B: 10-second clips
SAMPLES_PER_HOUR = 3600.0 / CLIP_SECONDS
EXPONENT_SPAN = 10.0  # local exponents from C / sqrt(10) to C x sqrt(10)


def chinchilla_exponents(params: dict[str, float]) -> tuple[float, float]:
    """(a, b) of N_opt ~ C^a, D_opt ~ C^b for L = E + A/N^alpha + B/D^beta (Hoffmann et al. Eq. 4)."""
    alpha, beta = params["alpha"], params["beta"]
    return beta / (alpha + beta), alpha / (alpha + beta)


def chinchilla_optimum(params: dict[str, float], compute: float) -> tuple[float, float]:
    """(N_opt, D_opt) minimising the loss law at C = 6 N D (Hoffmann et al. Eq. 4)."""
    alpha, beta = params["alpha"], params["beta"]
    g = (alpha * params["A"] / (beta * params["B"])) ** (1.0 / (alpha + beta))
    a, b = chinchilla_exponents(params)
    return g * (compute / 6.0) ** a, (compute / 6.0) ** b / g


@dataclass(frozen=True)
class FlopsPerSample:
    """Training FLOPs of one sample as a power of the parameter count, f(N) = exp(log_k) N^gamma,
    and how many samples an hour of audio makes (10 s clips by default; a 2 s crop model: 1,800)."""

    log_k: float
    gamma: float
    samples_per_hour: float = SAMPLES_PER_HOUR

    @classmethod
    def fit(
        cls, n_params: np.ndarray, flops_per_sample: np.ndarray, *, samples_per_hour: float = SAMPLES_PER_HOUR
    ) -> FlopsPerSample:
        n, f = np.log(np.asarray(n_params, float)), np.log(np.asarray(flops_per_sample, float))
        if len(np.unique(n)) < 2:
            raise ValueError("FLOPs per sample need at least 2 model sizes to relate them to N")
        gamma, log_k = np.polyfit(n, f, 1)
        return cls(log_k=float(log_k), gamma=float(gamma), samples_per_hour=samples_per_hour)

    def __call__(self, n: float | np.ndarray) -> float | np.ndarray:
        return np.exp(self.log_k) * np.asarray(n, float) ** self.gamma

    def hours_for(self, compute: float, n: float | np.ndarray) -> float | np.ndarray:
        """Hours of audio, each sample seen once, that `compute` buys for a model of N parameters."""
        return compute / (self(n) * self.samples_per_hour)


@dataclass(frozen=True, kw_only=True)
class QualityOptimum:
    n_params: float
    hours: float
    q: float
    at_edge: bool  # the best N lies at an end of the searched range: the law does not place it


def quality_optimum(
    q_of_nd: Callable[[np.ndarray, np.ndarray], np.ndarray],
    flops: FlopsPerSample,
    compute: float,
    n_range: tuple[float, float],
) -> QualityOptimum:
    """The N in `n_range` that maximises Q along the iso-compute curve, and its D and Q."""
    log_low, log_high = math.log(n_range[0]), math.log(n_range[1])
    grid = np.linspace(log_low, log_high, 401)
    values = q_of_nd(np.exp(grid), flops.hours_for(compute, np.exp(grid)))
    best = int(np.nanargmax(values))
    left, right = grid[max(best - 1, 0)], grid[min(best + 1, len(grid) - 1)]

    def negative_q(log_n: float) -> float:
        n = math.exp(log_n)
        return -float(q_of_nd(np.array([n]), np.array([flops.hours_for(compute, n)]))[0])

    refined = minimize_scalar(negative_q, bounds=(left, right), method="bounded", options={"xatol": 1e-6})
    log_n = float(refined.x) if -refined.fun >= values[best] else float(grid[best])
    n = math.exp(log_n)
    edge = (log_high - log_low) / 400.0
    return QualityOptimum(
        n_params=n, hours=float(flops.hours_for(compute, n)), q=-negative_q(log_n),
        at_edge=log_n - log_low < 1.5 * edge or log_high - log_n < 1.5 * edge,
    )  # fmt: skip


def local_exponents(optimum_at: Callable[[float], tuple[float, float]], compute: float) -> tuple[float, float]:
    """(a, b): slopes of log N_opt and log D_opt against log C around `compute`."""
    low, high = compute / math.sqrt(EXPONENT_SPAN), compute * math.sqrt(EXPONENT_SPAN)
    (n_low, d_low), (n_high, d_high) = optimum_at(low), optimum_at(high)
    span = math.log(high / low)
    return math.log(n_high / n_low) / span, math.log(d_high / d_low) / span
