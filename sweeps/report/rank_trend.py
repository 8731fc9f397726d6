"""Does Q rise or fall with x at all? Spearman's rank correlation, the check that needs no law.

A saturating law fitted to a cloud of points converges to a flat line with R² near 0 but above it,
and its parameters then describe nothing. A rank correlation asks the question before any law does.
"""

from __future__ import annotations

import numpy as np
from scipy.stats import spearmanr

TREND_P_VALUE = 0.05  # a trend needs a rank correlation with p below this
MIN_POINTS_FOR_RANKS = 4  # below this no rank correlation reaches p < 0.05


def no_monotone_trend(x: np.ndarray, q: np.ndarray, label: str, *, what: str = "Q") -> str:
    """Why `what` (Q, or one task's score) does not detectably rise or fall with x, or "" when it does (or when too few points,
    or a constant x or Q, leave the test undefined: other checks cover those). Checkpoints of one
    trial are not independent, so this p is if anything too small: the check fires less often than
    it should, never more."""
    x, q = np.asarray(x, dtype=float), np.asarray(q, dtype=float)
    if len(q) < MIN_POINTS_FOR_RANKS or np.ptp(x) == 0 or np.ptp(q) == 0:
        return ""
    rho, p_value = spearmanr(x, q)
    if p_value < TREND_P_VALUE:
        return ""
    return (
        f"{what} does not rise or fall with {label}: Spearman's rank correlation {rho:+.2f} "
        f"(p {p_value:.2f} over {len(q)} points)"
    )
