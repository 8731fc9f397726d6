"""The conv feature encoder: one frame per stored 320-sample frame, a 400-sample receptive field,
the two normalisation modes, the gradient scale and the FLOP count."""

from __future__ import annotations

import pytest
import torch

from models.wave.feature_encoder import (
    END_PADDING_SAMPLES,
    WaveFeatureEncoder,
    conv_output_lengths,
    frames_to_waveform,
)


def _encoder(mode: str = "layer_norm", **kwargs) -> WaveFeatureEncoder:
    torch.manual_seed(0)
    return WaveFeatureEncoder(dim=16, conv_channels=8, mode=mode, **kwargs).eval()


def test_conv_stack_lengths_for_ten_seconds() -> None:
    # 160000 samples alone give 499 frames; the 80 padded zeros give the 500 stored frames
    assert conv_output_lengths(160_000)[-1] == 499
    assert conv_output_lengths(160_000 + END_PADDING_SAMPLES) == [32015, 16007, 8003, 4001, 2000, 1000, 500]


@pytest.mark.parametrize("n_frames", [1, 7, 100, 500])
def test_output_has_exactly_the_stored_frames(n_frames: int) -> None:
    features = _encoder("group_norm")(torch.randn(2, n_frames, 320))
    assert features.conv.shape == (2, n_frames, 8)
    assert features.normalized.shape == (2, n_frames, 8)
    assert features.projected.shape == (2, n_frames, 16)


def test_waveform_is_the_frames_in_order_then_80_zeros() -> None:
    batch = torch.arange(2 * 3 * 320, dtype=torch.float32).reshape(2, 3, 320)
    waveform = frames_to_waveform(batch)
    assert waveform.shape == (2, 3 * 320 + 80)
    assert torch.equal(waveform[1, :960], torch.arange(960.0, 1920.0))
    assert not waveform[:, 960:].any()


def test_each_frame_sees_its_400_samples_only() -> None:
    # layer-norm mode normalises per position, so a sample can only reach the frames whose field
    # [320 t, 320 t + 400) holds it (group-norm mode normalises over all of time)
    encoder = _encoder("layer_norm")
    batch = torch.randn(1, 10, 320)
    base = encoder(batch).conv
    for sample, frames in [(1999, {5, 6}), (2000, {6}), (1919, {5}), (1920, {5, 6})]:
        changed = batch.clone().reshape(1, -1)
        changed[0, sample] += 5.0
        delta = (encoder(changed.reshape(1, 10, 320)).conv - base).abs().amax(dim=-1)[0]
        assert set(torch.nonzero(delta > 1e-6).flatten().tolist()) == frames, sample


def test_group_norm_mode_norms_the_first_conv_only_without_bias() -> None:
    encoder = _encoder("group_norm")
    norms = [type(block.norm).__name__ for block in encoder.conv_layers]
    assert norms == ["GroupNorm"] + ["Identity"] * 6
    assert encoder.conv_layers[0].norm.num_groups == 8  # one group per channel
    assert all(block.conv.bias is None for block in encoder.conv_layers)


def test_layer_norm_mode_norms_every_conv() -> None:
    encoder = _encoder("layer_norm", conv_bias=True)
    assert [type(block.norm).__name__ for block in encoder.conv_layers] == ["_ChannelLayerNorm"] * 7
    assert all(block.conv.bias is not None for block in encoder.conv_layers)


def test_gradient_scale_shrinks_conv_gradients_only() -> None:
    batch = torch.randn(2, 5, 320)
    grads = {}
    for scale in (1.0, 0.1):
        encoder = _encoder("group_norm", gradient_scale=scale).train()
        encoder(batch).projected.square().sum().backward()
        grads[scale] = (encoder.conv_layers[3].conv.weight.grad, encoder.projection.linear.weight.grad)
    torch.testing.assert_close(grads[0.1][0], 0.1 * grads[1.0][0])
    torch.testing.assert_close(grads[0.1][1], grads[1.0][1])


def test_wrong_input_layout_names_the_preset() -> None:
    with pytest.raises(ValueError, match="'waveform' front-end preset"):
        _encoder()(torch.randn(2, 100, 128))


def test_flops_count_conv_weights_times_output_positions() -> None:
    with torch.device("meta"):
        encoder = WaveFeatureEncoder(dim=768)  # Base: group norm, no bias
    # first conv: 512 x 10 weights + GroupNorm 1024, at 32015 positions; then 512 x 512 x k
    lengths = [32015, 16007, 8003, 4001, 2000, 1000, 500]
    weights = [512 * 10 + 1024] + [512 * 512 * 3] * 4 + [512 * 512 * 2] * 2
    projection = 2 * 512 + 512 * 768 + 768
    expected = 6.0 * (sum(w * n for w, n in zip(weights, lengths)) + projection * 500)
    assert encoder.training_flops_per_sample(500) == pytest.approx(expected)
    # ~149 GFLOPs per 10 s clip, over half the Base transformer's 6 x 89.8M x 500 = 269 GFLOPs
    assert expected == pytest.approx(1.487e11, rel=1e-3)
