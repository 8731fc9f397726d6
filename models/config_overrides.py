"""Apply user overrides to a frozen config dataclass with errors that name the bad field."""

from __future__ import annotations

import dataclasses
from typing import TypeVar

ConfigT = TypeVar("ConfigT")


def apply_overrides(config: ConfigT, overrides: dict[str, object]) -> ConfigT:
    fields = {field.name for field in dataclasses.fields(config)}  # type: ignore[arg-type]
    unknown = sorted(set(overrides) - fields)
    if unknown:
        raise ValueError(
            f"unknown override(s) {unknown} for {type(config).__name__}; valid: {sorted(fields)}"
        )
    if "name" in overrides:
        raise ValueError("the model name is not an override: pick another registered name")
    return dataclasses.replace(config, **overrides)  # type: ignore[type-var]
