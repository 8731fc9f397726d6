"""A real checkpoint folder of a debug model at its seeded initialisation, for the tests of commands
that read one (evaluate's errors, a dead tracking server, a damaged task folder)."""

from __future__ import annotations

from pathlib import Path

import torch

import models
from pipeline.checkpoint import save_model_checkpoint


def tiny_checkpoint(folder: Path, model_name: str = "audiomae++-debug", *, step: int = 5) -> Path:
    torch.manual_seed(0)
    model = models.build_model(model_name)
    return save_model_checkpoint(folder, model, model_name=model_name, overrides={}, step=step, shard_fingerprint="t")
