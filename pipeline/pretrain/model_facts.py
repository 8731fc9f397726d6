"""What the pipeline needs to know about a model before training it, from one weightless build.

The model is built on the meta device (same modules, no memory), once per run: its spec (front-end
preset, crop length, mask ratio), parameter counts and FLOPs all come from that one build, which
the pretraining driver and a study trial share instead of building their own.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import torch

import models
from models import ModelSpec


@dataclasses.dataclass(frozen=True, kw_only=True)
class ModelFacts:
    spec: ModelSpec
    encoder_parameters: int
    total_parameters: int
    training_flops_per_sample: float
    lr_scale: float  # CrossMAE's gamma / p; 1.0 for every other decoder
    needs_codebook: bool = False  # predicts k-means targets (HuBERT) and was built without a codebook

    def mlflow_params(self) -> dict[str, Any]:
        """The facts a run records (crop length and mask ratio travel in the config instead)."""
        return {
            "encoder_parameters": self.encoder_parameters,
            "total_parameters": self.total_parameters,
            "training_flops_per_sample": self.training_flops_per_sample,
            "lr_scale": self.lr_scale,
        }


def describe_model(model_name: str, overrides: dict[str, Any]) -> ModelFacts:
    """Build `models.build_model(model_name, **overrides)` without weights and read its facts;
    an unknown name or a bad override is a ValueError naming the flag (checked before Ray starts)."""
    if model_name not in models.list_models():
        raise ValueError(f"--model {model_name!r} is not a registered model; `python -m models --list` shows them")
    try:
        with torch.device("meta"):
            model = models.build_model(model_name, **overrides)
    except (ValueError, TypeError) as error:
        raise ValueError(f"--model {model_name} with --override {overrides}: {error}") from error
    return ModelFacts(
        spec=model.spec,
        encoder_parameters=models.count_parameters(model.encoder),
        total_parameters=models.count_parameters(model),
        training_flops_per_sample=model.training_flops_per_sample(),
        lr_scale=float(getattr(model, "lr_scale", 1.0)),
        needs_codebook=bool(getattr(model, "needs_codebook", False)),
    )
