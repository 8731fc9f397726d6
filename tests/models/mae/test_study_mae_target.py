"""The study MAE regresses Dasheng's target: the dB log-mel normalised per patch, not the standardised crop."""

from __future__ import annotations

import torch

import models


def _dasheng_target(raw_db: torch.Tensor, model) -> torch.Tensor:
    """dasheng/train/models.py: patchify(front_end(x)), then MAELoss's per-patch (x - mean) / (var + 1e-6)^0.5."""
    patches = model.patchify(raw_db)
    mean, var = patches.mean(dim=-1, keepdim=True), patches.var(dim=-1, keepdim=True)
    return (patches - mean) / (var + 1e-6) ** 0.5


def test_the_loss_regresses_per_patch_normalised_db_when_fed_standardised_crops():
    torch.manual_seed(0)
    model = models.build_model("mae-en256-1", mask_ratio=0.75)
    assert model.config.target_raw_db
    bin_mean, bin_std = torch.linspace(-60.0, -20.0, 64), torch.linspace(5.0, 15.0, 64)
    raw_db = bin_mean + bin_std * torch.randn(2, 1000, 64)
    standardised = (raw_db - bin_mean) / bin_std  # what the shard reader hands the model
    model.set_input_standardisation(bin_mean, bin_std)
    torch.testing.assert_close(model.target_mel(standardised), raw_db, atol=1e-4, rtol=0)
    # The loss against Dasheng's target, scored on the removed patches, is what forward computes.
    torch.manual_seed(1)
    output = model(standardised)
    target = _dasheng_target(raw_db, model)
    expected = (((output.pred - target) ** 2).mean(dim=-1) * output.scored).sum() / output.scored.sum()
    torch.testing.assert_close(output.loss, expected, atol=1e-4, rtol=1e-4)
    # The two targets differ: a per-bin map is not undone by normalising a patch that spans every bin.
    other = _dasheng_target(standardised, model)
    correlation = torch.corrcoef(torch.stack([target.flatten(), other.flatten()]))[0, 1]
    assert correlation < 0.95
