"""What a scaling-law fit accepts: finite, positive inputs, one per trial, enough points; bootstrap units.

A message names the offending input and what to do about it, so a study fails with a reason.
"""

from __future__ import annotations

from typing import Any

import numpy as np

MIN_POINTS = 5  # fewer cannot identify a 3-parameter law


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
            raise ValueError(f"{name} has {len(column)} values but {target_name} has {len(y)}; pass one per trial")
        if np.any(column <= 0):
            raise ValueError(f"{name} must be positive (the law uses its logarithm); got min {column.min():g}")
    if len(y) < MIN_POINTS:
        raise ValueError(
            f"need at least {MIN_POINTS} points to fit a scaling law, got {len(y)}; "
            "fewer cannot identify a 3-parameter law - run more configurations"
        )
    if quality and (np.any(y < 0) or np.any(y > 1)):
        raise ValueError(f"{target_name} must lie in [0, 1] (a HEAR-style score); got range [{y.min():g}, {y.max():g}]")
    if quality and np.any(y == 1):
        raise ValueError(f"{target_name} contains 1.0: the fit works on the error 1 - {target_name}, which must be > 0")
    if not quality and np.any(y <= 0):
        raise ValueError(f"{target_name} must be positive (fitted in log space); got min {y.min():g}")
    return columns, y


def configuration_groups(columns: list[np.ndarray], groups: Any | None, n: int) -> np.ndarray:
    """Bootstrap units: the given groups, else points with identical inputs (seeds of one config)."""
    if groups is not None:
        labels = np.asarray(groups).reshape(-1)
        if len(labels) != n:
            raise ValueError(f"groups has {len(labels)} labels but there are {n} points")
        return np.unique(labels, return_inverse=True)[1]
    return np.unique(np.stack(columns, axis=1), axis=0, return_inverse=True)[1].reshape(-1)
