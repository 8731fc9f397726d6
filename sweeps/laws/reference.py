"""The study's own estimator (paper App. E): least squares on Q itself, Q_inf in [0, 1], the rest > 0.

Deng et al. fit every law with scipy's curve_fit: squared residuals of Q (not of log(1 - Q)),
Q_inf bounded to [0, 1], every other parameter bounded below by 0, at most 5000 iterations, and
report R^2 of Eq. 8 on Q. `QSpaceLaw` wraps a log-error form of sweeps.laws.forms so that the
same converged multi-start optimizer and configuration bootstrap (sweeps.laws.optimizer) minimise that
objective instead:

- the model is Q = 1 - exp(log e(theta)), its jacobian -e * d log e / d theta (chain rule), so
  the parametrisation (log(1 - Q_inf), log A, alpha, ...) and the start grids are the form's own;
- bounds are App. E's and nothing more: log(1 - Q_inf) in [floor, 0] (Q_inf in [0, 1], 1 up to
  e^-30), exponents > 0 without the log-error fit's cap at 2, and no "Q_inf >= best observed Q".

Eq. 7 read literally on Q with every parameter > 0 makes Q fall towards Q_inf from above as N and
D grow, the opposite of Fig. 6a; the joint reference therefore fits the error form of Eq. 7
(sweeps.laws.forms.JointLaw, Q rises to Q_inf) by least squares on Q with App. E's bounds.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from sweeps.laws.forms import LOG_ERROR_FLOOR
from sweeps.laws.optimizer import Bounds

# App. E: parameters other than Q_inf "greater than 0"; a positive floor keeps 1/alpha finite.
POSITIVE_FLOOR = 1e-6
# App. E: "we set the range of parameter Q_inf to [0, 1]": log(1 - Q_inf) <= log(1) = 0.
LOG_ERROR_CEILING = 0.0
# App. E caps curve_fit at 5000 iterations; ours are not capped there but checked converged (fit.py).
# Extra starts the log-error grid (Q_inf above the best observed Q only) never tries: Q_inf a
# little below the best Q (log(1 - Q_inf) above the smallest observed log error).
_EXTRA_LOG_ERROR_OFFSETS = (0.3,)


@dataclass(frozen=True)
class QSpaceLaw:
    """A log-error law form fitted by least squares on Q with the paper's bounds (App. E)."""

    base: Any  # SaturatingLaw or JointLaw of sweeps.laws.forms
    space: str = "q"  # what the optimizer's residuals are in (sweeps.laws.fits reads it)

    @property
    def name(self) -> str:
        return self.base.name

    @property
    def param_names(self) -> tuple[str, ...]:
        return self.base.param_names

    def log_model(self, theta: np.ndarray, log_x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Q and dQ/dtheta (the name is the optimizer's interface: it fits whatever this returns)."""
        log_error, jacobian = self.base.log_model(theta, log_x)
        error = np.exp(log_error)
        return 1.0 - error, -error[..., None] * jacobian

    def bounds(self, q: np.ndarray) -> Bounds:
        """App. E's box, whatever the data; exponent slots of the base form lose their upper cap."""
        base_bounds = self.base.bounds(np.log(np.clip(1.0 - q, 1e-300, None)))
        bounds: Bounds = [(LOG_ERROR_FLOOR, LOG_ERROR_CEILING)]
        for low, high in base_bounds[1:]:
            unbounded_log = low is None and high is None
            bounds.append((None, None) if unbounded_log else (POSITIVE_FLOOR, None))
        return bounds

    def start_grid(self, log_x: np.ndarray, q: np.ndarray) -> np.ndarray:
        log_error = np.log(1.0 - q)
        grid = self.base.start_grid(log_x, log_error)
        extra = []
        # Q_inf = 1 (no saturation: the floor), and the offsets above.
        for offset in (LOG_ERROR_FLOOR + 1.0 - float(log_error.min()), *_EXTRA_LOG_ERROR_OFFSETS):
            shifted = grid.copy()
            shifted[:, 0] = np.minimum(float(log_error.min()) + offset, LOG_ERROR_CEILING)
            extra.append(shifted)
        return np.concatenate([grid, *extra])

    def params_from_theta(self, theta: np.ndarray) -> dict[str, float]:
        return self.base.params_from_theta(theta)

    def predict(self, params: dict[str, float], *inputs: np.ndarray) -> np.ndarray:
        return self.base.predict(params, *inputs)
