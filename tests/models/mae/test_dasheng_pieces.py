"""Dasheng's model pieces in the study MAE: input BatchNorm over mel bins, separate time and
frequency position tables, masking in pairs of time-adjacent patches (Dasheng's models.py)."""

from __future__ import annotations

import pytest
import torch

import models
from models.layers.masking import count_kept
from models.layers.positions import PositionEmbedding
from models.mae.audiomae_plus import audiomae_plus_config
from models.mae.decoder import DecoderOutput
from models.mae.study_mae import STUDY_TABLE_TOTAL_M, debug_mae_config, study_mae_config


def _skewed_mel(batch: int = 4, frames: int = 200, n_mels: int = 64, seed: int = 0) -> torch.Tensor:
    """Log-mel-like input whose bins have very different means and scales."""
    generator = torch.Generator().manual_seed(seed)
    offsets = torch.linspace(-8.0, 4.0, n_mels)
    scales = torch.linspace(0.5, 3.0, n_mels)
    return offsets + scales * torch.randn(batch, frames, n_mels, generator=generator)


def test_study_configs_enable_the_dasheng_pieces_and_audiomae_plus_does_not() -> None:
    study = [study_mae_config(f"mae-en{w}-{d}", w, d) for w, d in STUDY_TABLE_TOTAL_M]
    for config in [*study, debug_mae_config()]:
        assert config.input_batchnorm and config.mask_group_patches == 2
        assert config.encoder_positions == "learnable_time_freq"
    plus = audiomae_plus_config("audiomae++-base", 768, 12, 12, 384)
    assert not plus.input_batchnorm and plus.mask_group_patches == 1
    assert plus.encoder_positions == "sincos2d"
    assert models.build_model("audiomae++-debug").encoder.input_norm is None


def test_input_batchnorm_normalizes_each_mel_bin_with_dasheng_momentum() -> None:
    encoder = models.build_model("mae-debug").encoder.train()
    assert encoder.input_norm.momentum == 0.01  # Dasheng: BatchNorm2d(n_mels, momentum=0.01)
    mel = _skewed_mel()
    out = encoder.normalize_mel(mel)
    flat = out.reshape(-1, 64)  # per mel bin, over batch and time
    assert torch.allclose(flat.mean(dim=0), torch.zeros(64), atol=1e-4)
    assert torch.allclose(flat.std(dim=0, unbiased=False), torch.ones(64), atol=1e-3)
    # running mean moves 1% of the way from 0 towards the batch mean
    batch_mean = mel.reshape(-1, 64).mean(dim=0)
    assert torch.allclose(encoder.input_norm.running_mean, 0.01 * batch_mean, atol=1e-5)


def test_eval_embedding_uses_running_statistics() -> None:
    model = models.build_model("mae-debug").eval()
    model.encoder.input_norm.running_mean.fill_(2.0)
    model.encoder.input_norm.running_var.fill_(4.0)
    mel = _skewed_mel()
    expected = (mel - 2.0) / (4.0 + model.encoder.input_norm.eps) ** 0.5
    assert torch.allclose(model.encoder.normalize_mel(mel), expected, atol=1e-6)
    with torch.no_grad():  # a frozen embedding: one clip's features do not depend on the batch
        assert torch.allclose(model.embed(mel[:1]), model.embed(mel)[:1], atol=1e-5)


def test_loss_targets_are_the_patches_before_the_batchnorm() -> None:
    model = models.build_model("mae-debug").train()
    mel = _skewed_mel()
    out = model(mel)
    decoded = DecoderOutput(pred=out.pred, scored=out.mask)
    before = model.forward_loss(model.patchify(mel), decoded)
    with torch.no_grad():
        after = model.forward_loss(model.patchify(model.encoder.normalize_mel(mel)), decoded)
    assert torch.allclose(out.loss, before)
    assert not torch.allclose(out.loss, after, rtol=1e-3)


def test_time_freq_positions_differ_only_by_the_frequency_table_at_one_time() -> None:
    model = models.build_model("mae-debug", patch_bins=16)  # 50 time x 4 frequency patches
    positions = model.encoder.pos_embed
    assert positions.time_table.shape == (50, 64) and positions.freq_table.shape == (4, 64)
    table = positions.full_table()[0]  # (200, 64), time-major
    t, f, g = 7, 1, 3
    assert torch.allclose(table[t * 4 + f] - table[t * 4 + g], positions.freq_table[f] - positions.freq_table[g])
    assert torch.allclose(table[t * 4 + f], positions.time_table[t] + positions.freq_table[f])
    ids = torch.tensor([[t * 4 + f, 0, 199]])
    assert torch.equal(positions.at(ids)[0], table[ids[0]])


def test_time_freq_tables_start_at_dasheng_std() -> None:
    positions = PositionEmbedding(kind="learnable_time_freq", n_time=500, n_freq=4, dim=256)
    assert positions.time_table.std().item() == pytest.approx(0.02, rel=0.05)  # Dasheng: randn * .02
    assert positions.n_positions == 2000


def test_study_mae_masks_pairs_of_time_adjacent_patches() -> None:
    for ratio in (0.5, 0.6, 0.7, 0.75, 0.8, 0.9):  # mae-debug: 50 patches
        model = models.build_model("mae-debug", mask_ratio=ratio)
        out = model(_skewed_mel(batch=3))
        n_keep = count_kept(50, ratio)
        assert out.mask.sum(dim=1).tolist() == [50.0 - n_keep] * 3
        removed_per_pair = out.mask.reshape(3, 25, 2).sum(dim=-1)
        assert ((removed_per_pair == 1.0).sum(dim=1) == n_keep % 2).all()  # an odd count splits one
        assert torch.isfinite(out.loss)


def test_a_group_size_that_does_not_divide_the_time_patches_names_the_field() -> None:
    with pytest.raises(ValueError, match="mask_group_patches=3"):
        models.build_model("mae-debug", mask_group_patches=3)  # 50 time patches
