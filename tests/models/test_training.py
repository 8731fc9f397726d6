"""Each debug model learns: its loss falls over a few dozen steps on real speech crops."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import models


def _crops(log_mel: np.ndarray, crop_frames: int, n_crops: int, seed: int) -> torch.Tensor:
    rng = np.random.default_rng(seed)
    starts = rng.integers(0, log_mel.shape[0] - crop_frames, size=n_crops)
    return torch.from_numpy(np.stack([log_mel[s : s + crop_frames] for s in starts]))


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
    mel = _crops(speech_log_mel[model.spec.frontend_preset], model.spec.crop_frames, 8, seed=0)
    optimizer = torch.optim.AdamW(model.parameters(), lr=2e-3 * model.lr_scale, weight_decay=0.0)
    losses = []
    for _ in range(40):
        loss = model(mel).loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    first, last = np.mean(losses[:5]), np.mean(losses[-5:])
    assert last < 0.8 * first, f"loss {first:.3f} -> {last:.3f}"
