"""Kaplan's 6N per processed token against the matmul FLOPs torch counts in a real training step."""

from __future__ import annotations

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

import models


@pytest.mark.parametrize(
    "name,overrides",
    [
        ("mae-debug", {}),
        ("audiomae++-debug", {}),
        ("audiomae++-debug", {"decoder": "cross", "prediction_ratio": 0.25}),
        ("mae-debug", {"decoder": "cross"}),
    ],
)
def test_training_flops_match_counted_matmuls(name: str, overrides: dict) -> None:
    model = models.build_model(name, **overrides)
    batch = 4
    counter = FlopCounterMode(display=False)
    with counter:
        model(torch.randn(batch, model.spec.crop_frames, model.spec.n_mels)).loss.backward()
    # Matmuls only: 6N also counts biases and norms (no matmul) and the input gradient of the
    # patch embedding (never computed), so the counted FLOPs sit a few percent below 6N.
    counted = sum(flops for op, flops in counter.get_flop_counts()["Global"].items() if "mm" in str(op))
    ratio = counted / batch / model.training_flops_per_sample()
    assert 0.9 < ratio <= 1.0


def test_cross_decoder_needs_fewer_flops_than_the_mae_decoder() -> None:
    mae = models.build_model("audiomae++-debug").training_flops_per_sample()
    cross = models.build_model("audiomae++-debug", decoder="cross", prediction_ratio=0.25)
    assert cross.training_flops_per_sample() < 0.7 * mae


def test_no_weight_decay_names_are_the_tokens_and_learnable_positions() -> None:
    plus = models.build_model("audiomae++-debug", decoder="cross")
    assert plus.no_weight_decay_names() == {"encoder.cls_token", "decoder.mask_token"}
    mae = models.build_model("mae-debug")
    names = dict(mae.named_parameters())
    assert mae.no_weight_decay_names() <= set(names)
    assert {"encoder.pos_embed.time_table", "encoder.pos_embed.freq_table"} <= mae.no_weight_decay_names()
