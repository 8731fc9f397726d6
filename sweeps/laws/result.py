"""A fitted scaling law: named parameters, bootstrap intervals, goodness of fit, prediction.

What sweeps.laws.fits returns; the report and the MLflow ledger read it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd


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
    estimator: str  # "reference" (paper App. E, least squares on Q), "log_error" or "log_loss"
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
        predictions = np.array([self.form.predict(row, *inputs) for row in self.replicates.to_dict("records")])
        tail = 100.0 * (1.0 - self.ci_level) / 2.0
        low, high = np.percentile(predictions, [tail, 100.0 - tail], axis=0)
        return low, high

    def to_dict(self) -> dict[str, Any]:
        return {
            "law": self.law,
            "estimator": self.estimator,
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
