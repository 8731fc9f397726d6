"""AxLSTM sizes reproduce the authors' parameter counts (models.md) and run forward + backward.

The full sizes are built on the meta device: shapes and parameter counts without memory or
arithmetic, so all six size/expansion pairs cost well under a second each.
"""

from __future__ import annotations

import pytest
import torch

import models

# (size, expansion factor) -> total parameters with head, millions (models.md, authors' code)
PAPER_TOTAL_MILLIONS = {
    ("tiny", 2): 2.92,
    ("small", 2): 11.22,
    ("base", 2): 43.96,
    ("tiny", 3): 4.34,
    ("small", 3): 16.72,
    ("base", 3): 65.59,
}


@pytest.mark.parametrize("size,expansion", sorted(PAPER_TOTAL_MILLIONS))
def test_total_parameters_within_half_a_percent_of_paper(size: str, expansion: int) -> None:
    with torch.device("meta"):
        model = models.build_model(f"axlstm-{size}", expansion_factor=expansion)
    total = models.count_parameters(model) / 1e6
    paper = PAPER_TOTAL_MILLIONS[(size, expansion)]
    assert abs(total - paper) / paper < 0.005, f"{total:.3f}M vs paper {paper}M"


def test_default_expansion_factor_is_the_papers_three() -> None:
    with torch.device("meta"):
        model = models.build_model("axlstm-tiny")
    assert model.config.expansion_factor == 3
    assert model.encoder.blocks[0].layer.inner_dim == 3 * 192


@pytest.mark.parametrize("size", ["tiny", "small", "base"])
def test_every_size_runs_forward_and_backward(size: str) -> None:
    with torch.device("meta"):
        model = models.build_model(f"axlstm-{size}")
        out = model(torch.empty(2, 200, 80))
        out.loss.backward()
        frames = model.embed(torch.empty(2, 200, 80))
    width = {"tiny": 192, "small": 384, "base": 768}[size]
    assert out.pred.shape == (2, 250, 64)
    assert frames.shape == (2, 50, 5 * width)
    assert all(p.grad is not None for p in model.parameters())


def test_base_pairs_with_the_cross_decoder() -> None:
    with torch.device("meta"):
        model = models.build_model("axlstm-base", decoder="cross", prediction_ratio=0.25)
        model(torch.empty(2, 200, 80)).loss.backward()
    assert model.lr_scale == pytest.approx(0.25 / 0.5)
    assert all(p.grad is not None for p in model.parameters())


def test_training_flops_are_six_times_parameters_times_tokens() -> None:
    # In-place masking: nearly every parameter touches all 250 patches + cls token.
    with torch.device("meta"):
        model = models.build_model("axlstm-base")
    params = models.count_parameters(model)
    tokens = 250 + 1
    assert model.training_flops_per_sample() == pytest.approx(6 * params * tokens, rel=0.01)
