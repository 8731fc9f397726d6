"""SSAST's joint objective (models/ssast/objective.py) against hand computations."""

from __future__ import annotations

import math

import pytest
import torch

import models
from models.ssast.objective import masked_patch_info_nce, masked_patch_mse


def test_info_nce_matches_a_hand_computation() -> None:
    # One clip, two masked patches of two values. Scores c_i . x_j: c_0 -> (1, 0), c_1 -> (2, 2).
    predictions = torch.tensor([[[1.0, 0.0], [0.0, 2.0]]])
    targets = torch.tensor([[[1.0, 1.0], [0.0, 1.0]]])
    # -1/2 [log(e^1 / (e^1 + e^0)) + log(e^2 / (e^2 + e^2))]
    by_hand = 0.5 * (math.log(1 + math.exp(-1)) + math.log(2))
    assert masked_patch_info_nce(predictions, targets).item() == pytest.approx(by_hand, rel=1e-6)
    # the reference code's transpose (softmax over predictions for each target) gives another number
    transposed = 0.5 * (math.log(1 + math.e) + math.log(1 + math.exp(-2)))
    assert abs(by_hand - transposed) > 0.2


def test_info_nce_draws_negatives_from_the_same_clip_only() -> None:
    torch.manual_seed(0)
    predictions, targets = torch.randn(2, 5, 8), torch.randn(2, 5, 8)
    per_clip = [masked_patch_info_nce(predictions[i : i + 1], targets[i : i + 1]) for i in range(2)]
    assert masked_patch_info_nce(predictions, targets).item() == pytest.approx(sum(per_clip).item() / 2)


def test_info_nce_is_near_zero_when_each_prediction_points_at_its_own_patch() -> None:
    targets = 10.0 * torch.eye(4)[None]  # orthogonal patches
    assert masked_patch_info_nce(targets, targets).item() < 1e-6
    # and log(n) when predictions carry no information
    assert masked_patch_info_nce(torch.zeros(1, 4, 4), targets).item() == pytest.approx(math.log(4))


def test_info_nce_refuses_mismatched_shapes() -> None:
    with pytest.raises(ValueError, match="n_masked"):
        masked_patch_info_nce(torch.zeros(1, 3, 4), torch.zeros(1, 4, 4))


def test_mse_averages_every_value_of_every_masked_patch() -> None:
    reconstructions = torch.tensor([[[1.0, 2.0], [3.0, 4.0]]])
    targets = torch.tensor([[[1.0, 0.0], [0.0, 4.0]]])
    assert masked_patch_mse(reconstructions, targets).item() == pytest.approx((4 + 9) / 4)


def test_model_loss_is_info_nce_plus_ten_times_mse() -> None:
    torch.manual_seed(0)
    model = models.build_model("ssast-debug-frame")
    assert model.config.generative_weight == 10.0  # SSAST: loss = nce + 10 * mse
    masked_tokens, targets = torch.randn(3, 50, 64), torch.randn(3, 50, 256)
    loss, reconstructions = model.forward_loss(masked_tokens, targets)
    nce = masked_patch_info_nce(model.discriminative_head(masked_tokens), targets)
    mse = ((model.generative_head(masked_tokens) - targets) ** 2).mean()
    assert loss.item() == pytest.approx(nce.item() + 10 * mse.item(), rel=1e-5)
    assert torch.equal(reconstructions, model.generative_head(masked_tokens))


def test_pred_holds_reconstructions_of_the_masked_patches_and_zeros_elsewhere() -> None:
    torch.manual_seed(0)
    model = models.build_model("ssast-debug-patch")
    out = model(torch.randn(2, 128, 128))
    masked = out.mask.bool()
    assert torch.equal(out.scored, out.mask)
    assert (out.pred[~masked] == 0).all()
    assert (out.pred[masked].abs().sum(dim=-1) > 0).all()
