"""The wav2vec 2.0 model contract: forward/backward, masks, embed, the loss's pieces, the
temperature step, the mask-ratio override, FLOPs."""

from __future__ import annotations

import pytest
import torch

import models
from models.wave.span_masking import span_mask

DEBUG_SIZES = ["wav2vec2-debug", "wav2vec2-conformer-debug-relpos", "wav2vec2-conformer-debug-rope"]


def _build(name: str, **overrides: object) -> torch.nn.Module:
    torch.manual_seed(0)
    return models.build_model(name, **overrides)


@pytest.mark.parametrize("name", DEBUG_SIZES)
def test_forward_backward_reaches_every_parameter(name: str) -> None:
    model = _build(name)
    out = model(torch.randn(3, 100, 320))
    assert out.loss.ndim == 0 and torch.isfinite(out.loss)
    out.loss.backward()
    assert [n for n, p in model.named_parameters() if p.grad is None] == []


@pytest.mark.parametrize("name", DEBUG_SIZES)
def test_mask_is_span_masking_with_equal_counts_and_pred_only_where_masked(name: str) -> None:
    model = _build(name)
    out = model(torch.randn(4, 100, 320))
    counts = out.mask.sum(dim=1)
    assert out.mask.shape == (4, 100) and len(set(counts.tolist())) == 1
    assert 20 <= counts[0] <= 70  # p T = 6.5 spans of 10 with overlaps (min 2 spans)
    assert torch.equal(out.scored, out.mask)
    assert out.pred.shape == (4, 100, model.config.final_dim)
    assert not out.pred[out.mask == 0].any() and out.pred[out.mask == 1].abs().sum(-1).min() > 0


@pytest.mark.parametrize("name", DEBUG_SIZES)
@pytest.mark.parametrize("n_frames", [100, 37, 1])
def test_embed_returns_exactly_the_stored_frames_without_masking(name: str, n_frames: int) -> None:
    model = _build(name).eval()
    batch = torch.randn(2, n_frames, 320)
    with torch.no_grad():
        frames = model.embed(batch)
        again = model.embed(batch)
    assert frames.shape == (2, n_frames, 64)
    assert torch.equal(frames, again)


def test_embed_layer_picks_a_block_output() -> None:
    batch = torch.randn(1, 50, 320)
    model = _build("wav2vec2-conformer-debug-relpos", embed_layer=1).eval()
    with torch.no_grad():
        _, context = model.encoder(batch)
        assert torch.equal(model.embed(batch), context.layers[0])
        assert not torch.equal(context.layers[0], context.last)
    with pytest.raises(ValueError, match=r"embed_layer=3: use None \(last\) or a block number in \[1, 2\]"):
        models.build_model("wav2vec2-debug", embed_layer=3)


def test_loss_is_contrastive_plus_weighted_diversity_and_feature_penalty() -> None:
    model = _build("wav2vec2-debug")
    batch = torch.randn(2, 100, 320)
    mask = span_mask(2, 100, start_probability=0.065, span_frames=10, generator=torch.Generator().manual_seed(0))
    losses = model.compute_losses(batch, mask, generator=torch.Generator().manual_seed(1))
    expected = losses.contrastive + 0.1 * losses.diversity + 10.0 * losses.feature_penalty
    assert losses.total.item() == pytest.approx(expected.item(), rel=1e-6)
    assert losses.logits.shape == (2, int(mask[0].sum()), 11)  # the positive + 10 distractors
    features = model.encoder.features(batch)
    assert losses.feature_penalty.item() == pytest.approx(features.conv.pow(2).mean().item(), rel=1e-5)
    assert 0.0 < losses.diversity.item() < 1.0


def test_training_forward_advances_the_temperature_eval_does_not() -> None:
    model = _build("wav2vec2-debug")
    batch = torch.randn(2, 100, 320)
    model(batch)
    model(batch)
    assert int(model.quantizer.step) == 2
    assert model.quantizer.current_temperature == pytest.approx(2.0 * 0.999995**2)
    model.eval()
    with torch.no_grad():
        model(batch)
    assert int(model.quantizer.step) == 2
    model.set_step(1_000_000)
    assert model.quantizer.current_temperature == 0.5


def test_spec_states_the_waveform_layout_and_the_expected_mask_ratio() -> None:
    with torch.device("meta"):
        spec = models.build_model("wav2vec2-base").spec
    assert (spec.n_mels, spec.crop_frames, spec.patch_frames, spec.patch_bins) == (320, 500, 1, 320)
    assert (spec.frontend_preset, spec.frame_hop_ms, spec.embed_dim) == ("waveform", 20.0, 768)
    # 1 - (1 - 32.5 / 490)^10: the 0.65 nominal minus overlaps
    assert spec.mask_ratio == pytest.approx(1 - (1 - 32.5 / 490) ** 10)


@pytest.mark.parametrize("name", ["wav2vec2-base", "wav2vec2-conformer-large-rope", *DEBUG_SIZES])
def test_spec_agrees_with_the_waveform_preset(name: str) -> None:
    from pipeline.audio.frontend import get_preset

    with torch.device("meta"):
        spec = models.build_model(name).spec
    preset = get_preset(spec.frontend_preset)
    assert preset.kind == "waveform" and preset.normalize_per_clip
    assert spec.n_mels == preset.n_mels == 320
    assert spec.frame_hop_ms == spec.patch_frames * preset.hop_ms == 20.0


def test_mask_ratio_override_sets_the_expected_masked_fraction() -> None:
    with torch.device("meta"):
        base = models.build_model("wav2vec2-base")
        round_trip = models.build_model("wav2vec2-base", mask_ratio=base.spec.mask_ratio)
        lighter = models.build_model("wav2vec2-base", mask_ratio=0.3)
    assert round_trip.config.span_start_probability == pytest.approx(0.065, rel=1e-12)
    assert lighter.spec.mask_ratio == pytest.approx(0.3)
    p = lighter.config.span_start_probability
    drawn = span_mask(
        64,
        500,
        start_probability=p,
        span_frames=10,
        same_count_per_row=False,
        generator=torch.Generator().manual_seed(0),
    )
    assert drawn.float().mean().item() == pytest.approx(0.3, abs=0.02)


def test_wrong_input_layout_names_the_preset() -> None:
    with pytest.raises(ValueError, match="'waveform' front-end preset"):
        _build("wav2vec2-debug")(torch.randn(2, 100, 128))


def test_no_weight_decay_names() -> None:
    assert _build("wav2vec2-debug").no_weight_decay_names() == {"mask_embedding"}
    names = _build("wav2vec2-conformer-debug-relpos").no_weight_decay_names()
    assert names == {"mask_embedding"} | {
        f"encoder.context.layers.{i}.attention.pos_bias_{uv}" for i in range(2) for uv in "uv"
    }


def test_base_training_flops_per_ten_second_clip() -> None:
    with torch.device("meta"):
        model = models.build_model("wav2vec2-base")
    conv_positions = [32015, 16007, 8003, 4001, 2000, 1000, 500]
    conv_weights = [512 * 10 + 1024] + [512 * 512 * 3] * 4 + [512 * 512 * 2] * 2
    per_frame = 395_008 + 89_775_488  # projection + context network (torchaudio's Base stack)
    heads = 512 * 640 + 640 + 640 * 128 + 256 * 256 + 256 + 768 * 256 + 256  # quantizer, project_q, final_proj
    n_masked = round(model.spec.mask_ratio * 500)  # 248 expected masked frames
    expected = 6.0 * (sum(w * n for w, n in zip(conv_weights, conv_positions)) + per_frame * 500 + heads * n_masked)
    assert n_masked == 248
    assert model.training_flops_per_sample() == pytest.approx(expected)
    assert expected == pytest.approx(4.190e11, rel=1e-3)


def test_conformer_flops_count_the_relative_table_rows_for_linear_pos() -> None:
    with torch.device("meta"):
        relpos = models.build_model("wav2vec2-conformer-large-relpos").encoder.context
        rope = models.build_model("wav2vec2-conformer-large-rope").encoder.context
    linear_pos = 24 * 1024 * 1024  # one bias-free 1024 x 1024 map per block, on 2T - 1 = 999 rows
    rope_weights = 24 * 24_175_616 + 2 * 1024  # blocks + final LayerNorm
    assert rope.training_flops_per_sample(500) == 6.0 * rope_weights * 500
    relpos_weights = 24 * 25_226_240 + 2 * 1024
    expected = 6.0 * ((relpos_weights - linear_pos) * 500 + linear_pos * 999)
    assert relpos.training_flops_per_sample(500) == expected
