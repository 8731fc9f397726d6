"""HuBERT's encoder: wav2vec 2.0's conv feature encoder + projection and conv-position transformer,
composed from the shared waveform backbone with HuBERT's settings (models/wave/hubert_config.py)."""

from __future__ import annotations

from models.wave.context import WaveContextEncoder
from models.wave.encoder import WaveEncoder
from models.wave.feature_encoder import WaveFeatureEncoder
from models.wave.hubert_config import HubertConfig


def build_hubert_encoder(config: HubertConfig) -> WaveEncoder:
    """Everything `embed` runs (what the pipeline counts as `model.encoder`); no conv biases (fairseq
    conv_bias False); dropout = attention dropout = dropout_input (fairseq's Base: all 0.1)."""
    features = WaveFeatureEncoder(
        dim=config.encoder_dim, conv_channels=config.conv_channels, mode=config.extractor_mode,
        conv_bias=False, projection_dropout=config.dropout, gradient_scale=config.feature_gradient_scale,
    )  # fmt: skip
    context = WaveContextEncoder(
        dim=config.encoder_dim, depth=config.encoder_depth, n_heads=config.encoder_heads, ffn_dim=config.ffn_dim,
        layer_norm_first=config.layer_norm_first, dropout=config.dropout, attention_dropout=config.dropout,
        position_conv_kernel=config.position_conv_kernel, position_conv_groups=config.position_conv_groups,
    )  # fmt: skip
    return WaveEncoder(features, context)
