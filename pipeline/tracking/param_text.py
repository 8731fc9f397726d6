"""How a value is written to MLflow: a param or tag as text as it is, anything else as JSON with its
floats as the user typed them, cut to what the store keeps; a metric's float the same way."""

from __future__ import annotations

import json
from typing import Any

MAX_PARAM_CHARS = 6000  # MLflow 3's limit on a param value is 6,000 characters


def as_typed(value: Any) -> Any:
    """Floats at 12 significant digits: 0.1 * 3e-4 is 2.9999999999999997e-05 in binary, which the UI
    printed as 0.000029999999999999997; the user typed 3e-05 (a float's last digits are rounding)."""
    if isinstance(value, float):
        return float(f"{value:.12g}")
    if isinstance(value, dict):
        return {key: as_typed(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [as_typed(item) for item in value]
    return value


def param_text(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(as_typed(value), sort_keys=True, default=str)
    return text[:MAX_PARAM_CHARS]
