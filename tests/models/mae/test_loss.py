"""The loss counts exactly the removed (MAE) or predicted (CrossMAE) patches, nothing else."""

from __future__ import annotations

import pytest
import torch

import models
from models.mae.decoder import DecoderOutput


@pytest.mark.parametrize(
    "name,overrides",
    [
        ("mae-debug", {}),
        ("audiomae++-debug", {}),
        ("audiomae++-debug", {"decoder": "cross", "prediction_ratio": 0.25}),
        ("mae-debug", {"decoder": "cross", "prediction_ratio": 0.5}),
    ],
)
def test_loss_gradient_reaches_only_scored_patches(name: str, overrides: dict) -> None:
    torch.manual_seed(0)
    model = models.build_model(name, **overrides)
    out = model(torch.randn(3, model.spec.crop_frames, model.spec.n_mels))
    (grad_pred,) = torch.autograd.grad(out.loss, out.pred)
    touched = grad_pred.abs().sum(dim=-1) > 0  # (batch, n_patches)
    scored = out.mask if out.scored is None else out.scored
    assert torch.equal(touched, scored.bool())
    assert torch.all(out.mask[scored.bool()] == 1.0)  # only removed patches are ever scored


def test_cross_decoder_scores_gamma_n_patches() -> None:
    model = models.build_model("audiomae++-debug", decoder="cross", prediction_ratio=0.25)
    out = model(torch.randn(2, 200, 80))
    assert out.scored.sum(dim=1).tolist() == [62.0, 62.0]  # int(250 * 0.25)


def test_forward_loss_is_mean_squared_error_over_scored_patches() -> None:
    model = models.build_model("audiomae++-debug")  # targets are not patch-normalized
    patches = torch.randn(2, 250, 64)
    scored = (torch.rand(2, 250) < 0.5).float()
    # off by 2 on scored patches, by 100 elsewhere: only the 2s may count
    pred = patches + 2.0 * scored[..., None] + 100.0 * (1 - scored[..., None])
    loss = model.forward_loss(patches, DecoderOutput(pred=pred, scored=scored))
    assert loss.item() == pytest.approx(4.0)
