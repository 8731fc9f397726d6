"""Each debug model learns: its loss falls over a few dozen steps on real speech crops."""

from __future__ import annotations

import pytest
import torch

import models
from tests.support.training_loop import assert_loss_fell, random_crops, train_losses


@pytest.mark.parametrize(
    "name,overrides",
    [
        ("mae-debug", {}),
        ("audiomae++-debug", {}),
        ("audiomae++-debug", {"decoder": "cross", "prediction_ratio": 0.4}),
    ],
)
def test_debug_model_loss_falls_on_speech(speech_log_mel: dict, name: str, overrides: dict) -> None:
    torch.manual_seed(0)
    model = models.build_model(name, **overrides)
    mel = random_crops(speech_log_mel[model.spec.frontend_preset], model.spec.crop_frames, 8, seed=0)
    assert_loss_fell(train_losses(model, mel, steps=40, lr=2e-3 * model.lr_scale))
