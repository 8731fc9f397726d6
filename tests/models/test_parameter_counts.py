"""Parameter counts of the real modules (built on the meta device: no memory) against the papers."""

from __future__ import annotations

import pytest
import torch

import models

# RankMe scaling study, Table I: total parameters (encoder + decoder) in millions.
STUDY_TABLE_I_TOTAL_M = {
    "mae-en1536-24": 707.01, "mae-en1536-12": 367.03, "mae-en1024-12": 177.69,
    "mae-en768-12": 111.32, "mae-en512-12": 63.84, "mae-en256-12": 35.22,
    "mae-en128-12": 27.99, "mae-en768-8": 82.97, "mae-en512-8": 51.23,
    "mae-en256-8": 32.06, "mae-en768-4": 54.62, "mae-en512-4": 38.62,
    "mae-en256-4": 28.90, "mae-en768-1": 33.36, "mae-en512-1": 29.16,
    "mae-en256-1": 26.53,
}  # fmt: skip

# AudioMAE++ paper, Table 2: encoder parameters in millions.
AUDIOMAE_PLUS_ENCODER_M = {"audiomae++-base": 141.9, "audiomae++-large": 504.0}


def _build_on_meta(name: str, **overrides: object) -> torch.nn.Module:
    with torch.device("meta"):
        return models.build_model(name, **overrides)


@pytest.mark.parametrize("name,total_m", sorted(STUDY_TABLE_I_TOTAL_M.items()))
def test_study_mae_total_parameters_match_table_i(name: str, total_m: float) -> None:
    # Exactly, to Table I's two decimals, with Dasheng's 252 / 253-row position tables.
    total = models.count_parameters(_build_on_meta(name))
    assert round(total / 1e6, 2) == total_m


def test_all_sixteen_study_rows_are_registered() -> None:
    registered = {name for name in models.list_models() if name.startswith("mae-en")}
    assert registered == set(STUDY_TABLE_I_TOTAL_M)


@pytest.mark.parametrize("name,encoder_m", sorted(AUDIOMAE_PLUS_ENCODER_M.items()))
def test_audiomae_plus_encoder_parameters_match_the_paper(name: str, encoder_m: float) -> None:
    encoder = _build_on_meta(name).encoder
    count = models.count_parameters(encoder)
    assert abs(count / 1e6 - encoder_m) / encoder_m < 1e-3


def test_audiomae_plus_sincos_tables_are_buffers_not_parameters() -> None:
    model = _build_on_meta("audiomae++-base")
    parameter_names = {name for name, _ in model.named_parameters()}
    assert not any("pos_embed" in name for name in parameter_names)
    assert model.encoder.pos_embed.table.shape == (1, 250, 768)
    # the count includes patch embedding, cls token, final norm and the unused third LayerNorm
    assert {"encoder.cls_token", "encoder.norm.weight", "encoder.blocks.0.norm3.weight"} <= parameter_names


def test_study_mae_position_tables_are_learnable_parameters() -> None:
    model = _build_on_meta("mae-en768-12")
    # Dasheng: time_pos_embed (1, dim, 1, T) and freq_pos_embed (1, dim, F, 1) in the encoder
    # Rows as Dasheng's code sizes them: 1008 // 4 = 252 time rows, 253 decoder rows
    # (dasheng/train/models.py, AudioPatchEmbed grid_size and AudioTransformerMAE_Decoder.pos_embed).
    assert model.encoder.pos_embed.time_table.shape == (252, 768)
    assert model.encoder.pos_embed.freq_table.shape == (1, 768)
    assert model.encoder.pos_embed.time_table.requires_grad
    # Dasheng's decoder: one pos_embed over all patches
    assert model.decoder.pos_embed.table.shape == (1, 253, 512)
    assert model.no_weight_decay_names() == {
        "encoder.pos_embed.time_table",
        "encoder.pos_embed.freq_table",
        "decoder.pos_embed.table",
        "decoder.mask_token",
    }


def test_crops_use_the_first_rows_of_the_longer_tables() -> None:
    torch.manual_seed(0)
    model = models.build_model("mae-en256-1").eval()
    crop = torch.randn(1, 1000, 64)  # 250 patches of the 252-row table
    assert model.embed(crop).shape == (1, 250, 256)
    short = models.build_model("mae-en256-1", encoder_position_rows=None, decoder_position_rows=None)
    assert models.count_parameters(model) - models.count_parameters(short) == 2 * 256 + 3 * 512
    with pytest.raises(ValueError, match="encoder_position_rows=252 is fewer than the crop's 500"):
        models.build_model("mae-en256-1", crop_frames=2000)


def test_study_mae_input_batchnorm_adds_two_parameters_per_mel_bin() -> None:
    with_norm = models.count_parameters(_build_on_meta("mae-en256-1"))
    without = models.count_parameters(_build_on_meta("mae-en256-1", input_batchnorm=False))
    assert with_norm - without == 2 * 64


def test_swiglu_hidden_widths_follow_int_8d_over_3() -> None:
    for name, hidden in [("audiomae++-tiny", 512), ("audiomae++-base", 2048), ("audiomae++-large", 2730)]:
        assert _build_on_meta(name).encoder.blocks[0].swiglu.gate.out_features == hidden


def test_own_swiglu_norm_keeps_the_parameter_count() -> None:
    shared = models.count_parameters(_build_on_meta("audiomae++-base"))
    own = models.count_parameters(_build_on_meta("audiomae++-base", swiglu_norm="own"))
    assert own == shared
