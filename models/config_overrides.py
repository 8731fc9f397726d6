"""Apply user overrides to a frozen config dataclass with errors that name the bad field."""

from __future__ import annotations

import dataclasses
from typing import TypeVar

ConfigT = TypeVar("ConfigT")

# Sizes that must be whole positive numbers: a 0-block encoder or 0-head attention builds without
# complaint and trains nothing (an `encoder_depth=0` override used to run to the end).
POSITIVE_SIZE_SUFFIXES = ("_depth", "_dim", "_heads", "_frames", "_bins", "n_mels")


def apply_overrides(config: ConfigT, overrides: dict[str, object]) -> ConfigT:
    fields = {field.name for field in dataclasses.fields(config)}  # type: ignore[arg-type]
    unknown = sorted(set(overrides) - fields)
    if unknown:
        raise ValueError(f"unknown override(s) {unknown} for {type(config).__name__}; valid: {sorted(fields)}")
    if "name" in overrides:
        raise ValueError("the model name is not an override: pick another registered name")
    for key, value in overrides.items():
        if key.endswith(POSITIVE_SIZE_SUFFIXES) and not (isinstance(value, int) and value >= 1):
            raise ValueError(f"{key}={value!r}: a size, must be a whole number of at least 1")
    return dataclasses.replace(config, **overrides)  # type: ignore[type-var]
