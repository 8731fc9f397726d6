"""Masked-modelling audio models in pure PyTorch (no Ray, no MLflow).

`build_model(name, **overrides)`, `list_models()`; conventions in models/interface.py.
"""

from models.interface import MaskedOutput, ModelSpec, count_parameters
from models.registry import build_model, list_models

__all__ = ["MaskedOutput", "ModelSpec", "build_model", "count_parameters", "list_models"]
