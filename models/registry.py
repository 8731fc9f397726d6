"""Name -> model builder. Family modules register their sizes when first imported.

A new family adds its module name to FAMILY_MODULES and calls `register_model` at import time.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass

from torch import nn

FAMILY_MODULES: tuple[str, ...] = (
    "models.mae.study_mae",
    "models.mae.teacher_targets",
    "models.mae.audiomae_plus",
    "models.axlstm.model",
    "models.ssast.model",
    "models.wave.wav2vec2",
    "models.wave.hubert",
)


@dataclass(frozen=True, kw_only=True)
class ModelEntry:
    name: str
    build: Callable[..., nn.Module]  # build(**overrides) -> model
    paper_parameters: str = ""  # the published parameter count this size reproduces, if any


_ENTRIES: dict[str, ModelEntry] = {}
_families_loaded = False


def register_model(name: str, build: Callable[..., nn.Module], *, paper_parameters: str = "") -> None:
    if name in _ENTRIES:
        raise ValueError(f"model name {name!r} registered twice")
    _ENTRIES[name] = ModelEntry(name=name, build=build, paper_parameters=paper_parameters)


def _load_families() -> None:
    global _families_loaded
    if not _families_loaded:
        for module_name in FAMILY_MODULES:
            importlib.import_module(module_name)
        _families_loaded = True


def list_models() -> list[str]:
    _load_families()
    return sorted(_ENTRIES)


def model_entry(name: str) -> ModelEntry:
    _load_families()
    if name not in _ENTRIES:
        raise KeyError(f"unknown model {name!r}; `python -m models --list` shows: {sorted(_ENTRIES)}")
    return _ENTRIES[name]


def build_model(name: str, **overrides: object) -> nn.Module:
    """Build a registered model; overrides replace fields of its configuration."""
    return model_entry(name).build(**overrides)
