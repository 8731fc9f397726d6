"""The wav2vec 2.0 / HuBERT backbone (feature encoder + projection + context network) against
torchaudio's builders, which implement the same stack without the pretraining heads: parameter
counts to the parameter, and the same outputs once torchaudio's weights are copied in.

torchaudio is a test-only oracle here; models/ never imports it.
"""

from __future__ import annotations

import pytest
import torch
from torchaudio.models import (
    wav2vec2_base,
    wav2vec2_large,
    wav2vec2_large_lv60k,
    wav2vec2_model,
)

from models.wave.context import WaveContextEncoder
from models.wave.feature_encoder import WaveFeatureEncoder, frames_to_waveform

# name -> ((dim, depth, heads, ffn, extractor mode, conv bias, pre-LN), torchaudio builder,
# its total with torchaudio 2.9.1)
PAPER_STACKS = {
    # Base: group-norm extractor without conv bias, post-LN, 768 x 12, 12 heads, FFN 3072
    "base": ((768, 12, 12, 3072, "group_norm", False, False), wav2vec2_base, 94_370_944),
    # Large as trained on LibriSpeech in the paper (fairseq's libri960_big): Base's extractor
    "large-librispeech": ((1024, 24, 16, 4096, "group_norm", False, False), wav2vec2_large, 315_427_968),
    # Large LV-60 (fairseq wav2vec2_large_librivox.yaml): layer-norm extractor with bias, pre-LN
    "large-lv60": ((1024, 24, 16, 4096, "layer_norm", True, True), wav2vec2_large_lv60k, 315_437_696),
}


def _count(module: torch.nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())


def _build_ours(dim, depth, n_heads, ffn_dim, mode, conv_bias, layer_norm_first, conv_channels=512):
    features = WaveFeatureEncoder(dim=dim, conv_channels=conv_channels, mode=mode, conv_bias=conv_bias)
    context = WaveContextEncoder(
        dim=dim, depth=depth, n_heads=n_heads, ffn_dim=ffn_dim, layer_norm_first=layer_norm_first
    )
    return features, context


@pytest.mark.parametrize("stack", sorted(PAPER_STACKS))
def test_backbone_parameters_equal_torchaudio(stack: str) -> None:
    arguments, builder, expected_total = PAPER_STACKS[stack]
    with torch.device("meta"):
        features, context = _build_ours(*arguments)
        reference = builder()
    assert _count(reference) == expected_total
    assert _count(features) + _count(context) == expected_total
    assert _count(features.conv_layers) == _count(reference.feature_extractor)
    assert _count(context.position_conv) == _count(reference.encoder.transformer.pos_conv_embed)


def _copy_torchaudio_weights(reference, features: WaveFeatureEncoder, context: WaveContextEncoder) -> None:
    """Load a torchaudio Wav2Vec2Model's weights into our modules (names differ, shapes match)."""
    state = {}
    for index, block in enumerate(reference.feature_extractor.conv_layers):
        state[f"f.conv_layers.{index}.conv.weight"] = block.conv.weight
        if block.conv.bias is not None:
            state[f"f.conv_layers.{index}.conv.bias"] = block.conv.bias
        if block.layer_norm is not None:
            state[f"f.conv_layers.{index}.norm.weight"] = block.layer_norm.weight
            state[f"f.conv_layers.{index}.norm.bias"] = block.layer_norm.bias
    projection = reference.encoder.feature_projection
    for ours, theirs in [("layer_norm", projection.layer_norm), ("linear", projection.projection)]:
        state[f"f.projection.{ours}.weight"] = theirs.weight
        state[f"f.projection.{ours}.bias"] = theirs.bias
    transformer = reference.encoder.transformer
    for name, value in transformer.pos_conv_embed.conv.state_dict().items():
        state[f"c.position_conv.conv.{name}"] = value
    state["c.layer_norm.weight"] = transformer.layer_norm.weight
    state["c.layer_norm.bias"] = transformer.layer_norm.bias
    for index, layer in enumerate(transformer.layers):
        attention, prefix = layer.attention, f"c.layers.{index}."
        for kind in ("weight", "bias"):
            state[prefix + f"attention.qkv.{kind}"] = torch.cat(
                [getattr(attention.q_proj, kind), getattr(attention.k_proj, kind), getattr(attention.v_proj, kind)]
            )
            state[prefix + f"attention.out.{kind}"] = getattr(attention.out_proj, kind)
            state[prefix + f"attention_norm.{kind}"] = getattr(layer.layer_norm, kind)
            state[prefix + f"fc1.{kind}"] = getattr(layer.feed_forward.intermediate_dense, kind)
            state[prefix + f"fc2.{kind}"] = getattr(layer.feed_forward.output_dense, kind)
            state[prefix + f"final_norm.{kind}"] = getattr(layer.final_layer_norm, kind)
    features.load_state_dict({k[2:]: v for k, v in state.items() if k.startswith("f.")})
    context.load_state_dict({k[2:]: v for k, v in state.items() if k.startswith("c.")})


@pytest.mark.parametrize(
    "mode,conv_bias,layer_norm_first",
    [
        ("group_norm", False, False),
        ("layer_norm", True, True),
    ],
)
def test_backbone_outputs_equal_torchaudio_with_its_weights(mode, conv_bias, layer_norm_first) -> None:
    torch.manual_seed(0)
    conv_layers = [(32, 10, 5)] + [(32, 3, 2)] * 4 + [(32, 2, 2)] * 2  # the paper's stack, narrower
    reference = wav2vec2_model(
        extractor_mode=mode,
        extractor_conv_layer_config=conv_layers,
        extractor_conv_bias=conv_bias,
        encoder_embed_dim=64,
        encoder_projection_dropout=0.0,
        encoder_pos_conv_kernel=128,
        encoder_pos_conv_groups=16,
        encoder_num_layers=2,
        encoder_num_heads=4,
        encoder_attention_dropout=0.0,
        encoder_ff_interm_features=128,
        encoder_ff_interm_dropout=0.0,
        encoder_dropout=0.0,
        encoder_layer_norm_first=layer_norm_first,
        encoder_layer_drop=0.0,
        aux_num_out=None,
    ).eval()
    features, context = _build_ours(64, 2, 4, 128, mode, conv_bias, layer_norm_first, conv_channels=32)
    _copy_torchaudio_weights(reference, features, context)
    features.eval(), context.eval()
    batch = torch.randn(2, 60, 320)
    with torch.no_grad():
        ours = context(features(batch).projected)
        waveform = frames_to_waveform(batch)  # torchaudio gets the same 80 padded zeros
        theirs_layers = reference.extract_features(waveform)[0]
        theirs_last, _ = reference(waveform)
    assert ours.last.shape == (2, 60, 64)
    for mine, theirs in zip(ours.layers, theirs_layers, strict=True):
        torch.testing.assert_close(mine, theirs, atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(ours.last, theirs_last, atol=1e-4, rtol=1e-4)
