"""The three law forms in log space: model + jacobian, bounds, start grids, named parameters.

Quality laws are fitted on the error e = 1 - Q (evaluation.md's recipe), so that every term of
the law is a positive power and log e is a log-sum-exp of linear terms:

- saturating: e(X) = E + (X_c / X)^alpha, E = 1 - Q_inf. Internally theta = (log E, log A, alpha)
  with A = X_c^alpha: log A is far better conditioned than log X_c when alpha is small.
- joint: e(N, D) = [E^(1/alpha) + (N_C/N)^(alpha_N/alpha) + (D_C/D)^(alpha_D/alpha)]^alpha,
  theta = (log E, alpha, log N_C, alpha_N, log D_C, alpha_D). Written on Q literally, with all
  parameters positive, the law would make Q fall as N and D grow; on the error it is Kaplan's
  L(N, D) form and Q rises to Q_inf.
- chinchilla: L(N, D) = E + A/N^alpha + B/D^beta, theta = (log E, log A, alpha, log B, beta).

Bounds: 0 < exponents <= 2; Q_inf in [0, 1] and at least the best observed Q (log E <= the
smallest observed log e).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

from sweeps.laws.optimizer import Bounds, log_sum_exp_terms

EXPONENT_BOUNDS = (1e-4, 2.0)
# exp(-30) ~ 1e-13: the error floor of a law that saturates at Q_inf = 1.
LOG_ERROR_FLOOR = -30.0


def _theta_columns(theta: np.ndarray) -> list[np.ndarray]:
    """Split (..., p) into p arrays shaped (..., 1) that broadcast against (n,) data."""
    return [theta[..., i, None] for i in range(theta.shape[-1])]


@dataclass(frozen=True)
class SaturatingLaw:
    """Q(X) = Q_inf - (X_c / X)^alpha."""

    name: str = "saturating"
    space: str = "log"  # residuals in log space (sweeps.laws.reference fits on Q instead)
    param_names: tuple[str, ...] = ("q_inf", "x_c", "alpha")

    def log_model(self, theta: np.ndarray, log_x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        log_e, log_a, alpha = _theta_columns(theta)
        lx = log_x[:, 0]
        terms = np.stack(np.broadcast_arrays(log_e, log_a - alpha * lx))  # (2, ..., n)
        value, w = log_sum_exp_terms(terms)
        jacobian = np.stack([w[0], w[1], -w[1] * lx], axis=-1)  # (..., n, 3)
        return value, jacobian

    def bounds(self, log_y: np.ndarray) -> Bounds:
        return [(LOG_ERROR_FLOOR, float(log_y.min())), (None, None), EXPONENT_BOUNDS]

    def start_grid(self, log_x: np.ndarray, log_y: np.ndarray) -> np.ndarray:
        top = float(log_y.min())
        lx_min, largest_error = float(log_x[:, 0].min()), float(np.exp(log_y.max()))
        rows = []
        for drop, alpha, share in itertools.product(
            (0.01, 0.5, 1.0, 2.0, 4.0), (0.05, 0.15, 0.4, 0.8, 1.5), (0.2, 0.5, 0.9)
        ):
            # The power term makes up `share` of the largest observed error at the smallest X.
            rows.append([top - drop, np.log(share * largest_error) + alpha * lx_min, alpha])
        return np.array(rows)

    def params_from_theta(self, theta: np.ndarray) -> dict[str, float]:
        log_e, log_a, alpha = (float(v) for v in theta)
        return {"q_inf": float(1.0 - np.exp(log_e)), "x_c": float(np.exp(log_a / alpha)), "alpha": alpha}

    def predict(self, params: dict[str, float], x: np.ndarray) -> np.ndarray:
        x = np.asarray(x, dtype=float)
        return params["q_inf"] - (params["x_c"] / x) ** params["alpha"]


@dataclass(frozen=True)
class JointLaw:
    """Q(N, D) = 1 - [(1 - Q_inf)^(1/alpha) + (N_C/N)^(alpha_N/alpha) + (D_C/D)^(alpha_D/alpha)]^alpha."""

    name: str = "joint"
    space: str = "log"  # residuals in log space (sweeps.laws.reference fits on Q instead)
    param_names: tuple[str, ...] = ("q_inf", "alpha", "n_c", "alpha_n", "d_c", "alpha_d")

    def log_model(self, theta: np.ndarray, log_x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        log_e, alpha, log_nc, alpha_n, log_dc, alpha_d = _theta_columns(theta)
        ln, ld = log_x[:, 0], log_x[:, 1]
        gap_n, gap_d = log_nc - ln, log_dc - ld
        terms = np.stack(np.broadcast_arrays(log_e / alpha, alpha_n / alpha * gap_n, alpha_d / alpha * gap_d))
        inner, w = log_sum_exp_terms(terms)
        value = alpha * inner
        weighted_terms = (w * terms).sum(axis=0)
        jacobian = np.stack(
            np.broadcast_arrays(
                w[0], inner - weighted_terms, w[1] * alpha_n, w[1] * gap_n, w[2] * alpha_d, w[2] * gap_d
            ),
            axis=-1,
        )
        return value, jacobian

    def bounds(self, log_y: np.ndarray) -> Bounds:
        # The outer alpha divides: keep it away from 0 so the terms stay finite.
        return [
            (LOG_ERROR_FLOOR, float(log_y.min())),
            (0.05, 2.0),
            (None, None),
            EXPONENT_BOUNDS,
            (None, None),
            EXPONENT_BOUNDS,
        ]

    def start_grid(self, log_x: np.ndarray, log_y: np.ndarray) -> np.ndarray:
        top, largest_error = float(log_y.min()), float(np.exp(log_y.max()))
        ln_min, ld_min = float(log_x[:, 0].min()), float(log_x[:, 1].min())
        rows = []
        for drop, alpha, alpha_n, alpha_d, share_n, share_d in itertools.product(
            (0.05, 1.0, 3.0), (0.5, 1.0, 1.5), (0.1, 0.3, 0.7), (0.1, 0.3, 0.7), (0.3, 0.8), (0.3, 0.8)
        ):
            log_nc = ln_min + np.log(share_n * largest_error) / alpha_n
            log_dc = ld_min + np.log(share_d * largest_error) / alpha_d
            rows.append([top - drop, alpha, log_nc, alpha_n, log_dc, alpha_d])
        return np.array(rows)

    def params_from_theta(self, theta: np.ndarray) -> dict[str, float]:
        log_e, alpha, log_nc, alpha_n, log_dc, alpha_d = (float(v) for v in theta)
        return {
            "q_inf": float(1.0 - np.exp(log_e)),
            "alpha": alpha,
            "n_c": float(np.exp(log_nc)),
            "alpha_n": alpha_n,
            "d_c": float(np.exp(log_dc)),
            "alpha_d": alpha_d,
        }

    def predict(self, params: dict[str, float], n: np.ndarray, d: np.ndarray) -> np.ndarray:
        n, d = np.asarray(n, dtype=float), np.asarray(d, dtype=float)
        alpha = params["alpha"]
        bracket = (
            (1.0 - params["q_inf"]) ** (1.0 / alpha)
            + (params["n_c"] / n) ** (params["alpha_n"] / alpha)
            + (params["d_c"] / d) ** (params["alpha_d"] / alpha)
        )
        return 1.0 - bracket**alpha


@dataclass(frozen=True)
class ChinchillaLaw:
    """L(N, D) = E + A / N^alpha + B / D^beta."""

    name: str = "chinchilla"
    space: str = "log"  # residuals in log space (sweeps.laws.reference fits on Q instead)
    param_names: tuple[str, ...] = ("E", "A", "B", "alpha", "beta")

    def log_model(self, theta: np.ndarray, log_x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        log_e, log_a, alpha, log_b, beta = _theta_columns(theta)
        ln, ld = log_x[:, 0], log_x[:, 1]
        terms = np.stack(np.broadcast_arrays(log_e, log_a - alpha * ln, log_b - beta * ld))
        value, w = log_sum_exp_terms(terms)
        jacobian = np.stack([w[0], w[1], -w[1] * ln, w[2], -w[2] * ld], axis=-1)
        return value, jacobian

    def bounds(self, log_y: np.ndarray) -> Bounds:
        return [(None, None), (None, None), EXPONENT_BOUNDS, (None, None), EXPONENT_BOUNDS]

    def start_grid(self, log_x: np.ndarray, log_y: np.ndarray) -> np.ndarray:
        # Hoffmann et al.'s initialisation grid (4500 starts), in (log E, log A, alpha, log B, beta).
        grid = itertools.product(
            np.arange(-1.0, 1.01, 0.5),
            np.arange(0.0, 26.0, 5.0),
            np.arange(0.0, 2.01, 0.5),
            np.arange(0.0, 26.0, 5.0),
            np.arange(0.0, 2.01, 0.5),
        )
        return np.array(list(grid))

    def params_from_theta(self, theta: np.ndarray) -> dict[str, float]:
        log_e, log_a, alpha, log_b, beta = (float(v) for v in theta)
        return {
            "E": float(np.exp(log_e)),
            "A": float(np.exp(log_a)),
            "B": float(np.exp(log_b)),
            "alpha": alpha,
            "beta": beta,
        }

    def theta_from_params(self, params: dict[str, float]) -> np.ndarray:
        return np.array(
            [np.log(params["E"]), np.log(params["A"]), params["alpha"], np.log(params["B"]), params["beta"]]
        )

    def predict(self, params: dict[str, float], n: np.ndarray, d: np.ndarray) -> np.ndarray:
        n, d = np.asarray(n, dtype=float), np.asarray(d, dtype=float)
        return params["E"] + params["A"] / n ** params["alpha"] + params["B"] / d ** params["beta"]
