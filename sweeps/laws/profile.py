"""Profile-likelihood interval for Q_inf of the saturating law Q(X) = Q_inf - (X_c / X)^alpha.

Q_inf is the parameter a bootstrap describes worst: it often sits on its bound (the best observed
Q) and its distribution is lopsided. The profile fixes Q_inf on a grid, refits the other two
parameters, and keeps every Q_inf whose Gaussian deviance n * log(RSS(Q_inf) / RSS_min) (log-space
residuals) stays within the chi-square(1) quantile.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.stats import chi2

from sweeps.laws.forms import SaturatingLaw
from sweeps.laws.inputs import validate_law_inputs
from sweeps.laws.optimizer import LogSpaceProblem, minimize_converged, refit_from


@dataclass(frozen=True, kw_only=True)
class ProfileInterval:
    q_inf: float  # the unconstrained best fit
    low: float
    high: float  # 1.0 when the data cannot exclude "no saturation"
    level: float


def _rss(problem: LogSpaceProblem, theta: np.ndarray) -> float:
    return float(np.sum(problem.residuals(theta) ** 2))


def profile_q_inf_interval(x: Any, q: Any, *, level: float = 0.95, n_grid: int = 24) -> ProfileInterval:
    """Profile-likelihood interval for Q_inf (squared log-error loss: fit_saturating's estimator="log_error", not the reference fit)."""
    (column,), y = validate_law_inputs({"x": x}, "q", q, quality=True)
    form = SaturatingLaw()
    log_x, log_y = np.log(column)[:, None], np.log(1.0 - y)
    bounds = form.bounds(log_y)
    problem = LogSpaceProblem(log_model=form.log_model, log_x=log_x, log_y=log_y, bounds=bounds, huber_delta=None)
    best = minimize_converged(problem, form.start_grid(log_x, log_y)).theta
    rss_min = _rss(problem, best)

    def profile_deviance(log_error: float, start: np.ndarray) -> tuple[float, np.ndarray]:
        """Deviance with log(1 - Q_inf) fixed; the other two parameters refitted from `start`."""
        fixed = LogSpaceProblem(
            log_model=form.log_model,
            log_x=log_x,
            log_y=log_y,
            bounds=[(log_error, log_error)] + bounds[1:],
            huber_delta=None,
        )
        theta, _ = refit_from(fixed, np.concatenate([[log_error], start[1:]]))
        return len(y) * np.log(max(_rss(fixed, theta), 1e-300) / max(rss_min, 1e-300)), theta

    threshold = float(chi2.ppf(level, df=1))

    def crossing(edge: float) -> tuple[float, bool]:
        """Walk from the optimum to `edge` (in log error); bisect where the deviance crosses."""
        path = np.linspace(best[0], edge, n_grid)
        theta, inside = best, best[0]
        for log_error in path[1:]:
            value, new_theta = profile_deviance(log_error, theta)
            if value > threshold:
                outside = log_error
                for _ in range(30):  # bisection to ~1e-9 of the step in log error
                    middle = 0.5 * (inside + outside)
                    middle_value, middle_theta = profile_deviance(middle, theta)
                    if middle_value > threshold:
                        outside = middle
                    else:
                        inside, theta = middle, middle_theta
                return 0.5 * (inside + outside), True
            inside, theta = log_error, new_theta
        return edge, False

    # Larger log error = smaller Q_inf; the upper log-error bound is Q_inf = best observed Q.
    low_log_error, _ = crossing(bounds[0][1])
    high_log_error, crossed = crossing(best[0] - 12.0)  # e^-12: Q_inf indistinguishable from 1
    return ProfileInterval(
        q_inf=float(1.0 - np.exp(best[0])),
        low=float(1.0 - np.exp(low_log_error)),
        high=float(1.0 - np.exp(high_log_error)) if crossed else 1.0,
        level=level,
    )
