"""Configuration of HuBERT (Hsu et al. 2021): one dataclass for every size; overrides replace fields.

Sizes (HuBERT Table I; fairseq examples/hubert/config/pretrain/hubert_{base_librispeech,
large_librivox,xlarge_librivox}.yaml): Base 768 wide, 12 blocks, 12 heads, FFN 3072, final_dim 256;
Large 1024 / 24 / 16 / 4096, final_dim 768; X-Large 1280 / 48 / 16 / 5120, final_dim 1024. Base
uses the "default" conv extractor (GroupNorm after the first conv), post-LN blocks, a 0.1 gradient
scale into the convs and dropout 0.1; Large and X-Large a LayerNorm after every conv, pre-LN blocks,
no gradient scaling and no dropout. Every size: conv position embedding 128 / 16 groups, logit
temperature 0.1, span masking p = 8% / l = 10 (Sec. IV-C; fairseq mask_prob 0.80 = p x l).
HuBERT = Hsu et al., arXiv 2106.07447 (not in /work/shared/papers; the fairseq configs are checked).

`codebook` names a `python -m pipeline.targets` output; the model labels its crops with it on the
fly. Without one the model still builds (parameter counts, `embed`), but `forward` refuses.
`clusters` sizes the label embeddings of a model built without a codebook (the paper's k: Base
iteration 1 on MFCC 100, Large / X-Large 500); a codebook brings its own k, which replaces it.
"""

from __future__ import annotations

from dataclasses import dataclass

from models.layers.masking import check_mask_ratio
from models.layers.patching import PatchGrid
from models.wave.span_masking import SpanMaskedConfig

SAMPLES_PER_FRAME = 320  # the `waveform` preset's stored frame = the conv encoder's stride (20 ms)
FRAME_HOP_MS = 20.0
EXTRACTOR_MODES = ("group_norm", "layer_norm")


@dataclass(frozen=True, kw_only=True)
class HubertConfig(PatchGrid, SpanMaskedConfig):
    name: str
    encoder_dim: int
    encoder_depth: int
    encoder_heads: int
    ffn_dim: int
    final_dim: int  # fairseq final_dim: the space where frames meet the label embeddings
    extractor_mode: str  # "group_norm" (fairseq "default", Base) | "layer_norm" (Large, X-Large)
    layer_norm_first: bool  # pre-LN blocks (Large, X-Large); Base is post-LN
    feature_gradient_scale: float  # fairseq feature_grad_mult: 0.1 Base, 1.0 Large / X-Large
    dropout: float  # fairseq dropout = attention_dropout = dropout_input: 0.1 Base, 0.0 Large / X-Large
    conv_channels: int = 512  # fairseq conv_feature_layers: 512 channels in all 7 convs
    position_conv_kernel: int = 128  # fairseq conv_pos
    position_conv_groups: int = 16  # fairseq conv_pos_groups
    clusters: int = 100  # label classes when built without a codebook; see the module docstring
    codebook: str | None = None  # a `python -m pipeline.targets` output folder
    # 10 s crops: the study's clip length (App. B); fairseq crops up to 250k samples (15.6 s).
    crop_frames: int = 500
    mask_start_probability: float = 0.08  # HuBERT Sec. IV-C: p = 8% of frames start a span
    mask_span_frames: int = 10  # HuBERT Sec. IV-C: l = 10
    # The project's `mask_ratio` (the pipeline's --mask-ratio, which also hands the model's own value
    # back): the expected masked fraction, 1 - (1 - p T / (T - l))^l with overlapping spans. None: it
    # follows from mask_start_probability; set, p is solved from it (as wav2vec 2.0's config does).
    mask_ratio: float | None = None
    logit_temperature: float = 0.1  # HuBERT Sec. II-E (tau = 0.1); fairseq logit_temp
    # fairseq hubert criterion loss_weights [10]: 10 x mean squared conv feature (features_pen), every size
    feature_penalty_weight: float = 10.0
    # `embed` returns the encoder output (None; the last block's, after the final LayerNorm for the
    # pre-LN sizes) or block k's output (1-based, fairseq `output_layer`): the RankMe study takes the
    # last layer for every architecture, so None is the default.
    embed_layer: int | None = None
    frontend_preset: str = "waveform"
    n_mels: int = SAMPLES_PER_FRAME  # a stored "frame" holds 320 samples, not mel bins
    patch_frames: int = 1  # one token per 20 ms frame
    patch_bins: int = SAMPLES_PER_FRAME

    def __post_init__(self) -> None:
        if self.frontend_preset != "waveform" or self.n_mels != SAMPLES_PER_FRAME:
            raise ValueError(
                f"{self.name}: HuBERT reads the 'waveform' preset ({SAMPLES_PER_FRAME} samples a frame), "
                f"got frontend_preset={self.frontend_preset!r}, n_mels={self.n_mels}"
            )
        if self.patch_frames != 1 or self.patch_bins != SAMPLES_PER_FRAME:
            raise ValueError(f"{self.name}: one token per stored frame: patch_frames=1, patch_bins={SAMPLES_PER_FRAME}")
        if self.extractor_mode not in EXTRACTOR_MODES:
            raise ValueError(f"{self.name}: extractor_mode={self.extractor_mode!r}, use one of {EXTRACTOR_MODES}")
        if self.encoder_dim % self.encoder_heads or self.encoder_dim % self.position_conv_groups:
            raise ValueError(
                f"{self.name}: encoder_dim={self.encoder_dim} must divide into encoder_heads="
                f"{self.encoder_heads} and position_conv_groups={self.position_conv_groups}"
            )
        if not 0.0 < self.mask_start_probability < 1.0 or self.mask_span_frames < 1:
            raise ValueError(
                f"{self.name}: mask_start_probability={self.mask_start_probability} must be in (0, 1) "
                f"and mask_span_frames={self.mask_span_frames} at least 1"
            )
        if self.mask_ratio is not None:
            check_mask_ratio(self.mask_ratio, where=f"{self.name}: mask_ratio")
        if self.crop_frames <= 2 * self.mask_span_frames:
            raise ValueError(
                f"{self.name}: crop_frames={self.crop_frames} leaves no room for "
                f"{self.mask_span_frames}-frame mask spans: use at least {2 * self.mask_span_frames + 1}"
            )
        if self.clusters < 2:
            raise ValueError(f"{self.name}: clusters={self.clusters} must be at least 2")
        if self.logit_temperature <= 0 or self.feature_penalty_weight < 0:
            raise ValueError(
                f"{self.name}: logit_temperature={self.logit_temperature} must be positive and "
                f"feature_penalty_weight={self.feature_penalty_weight} not negative"
            )
        if not 0.0 < self.feature_gradient_scale <= 1.0 or not 0.0 <= self.dropout < 1.0:
            raise ValueError(
                f"{self.name}: feature_gradient_scale={self.feature_gradient_scale} must be in (0, 1] "
                f"and dropout={self.dropout} in [0, 1)"
            )
        if self.embed_layer is not None and not 1 <= self.embed_layer <= self.encoder_depth:
            raise ValueError(
                f"{self.name}: embed_layer={self.embed_layer}: use None (the last layer) or a block "
                f"number in [1, {self.encoder_depth}]"
            )


def hubert_base_config(name: str = "hubert-base") -> HubertConfig:
    return HubertConfig(
        name=name,
        encoder_dim=768,
        encoder_depth=12,
        encoder_heads=12,
        ffn_dim=3072,
        final_dim=256,
        extractor_mode="group_norm",
        layer_norm_first=False,
        feature_gradient_scale=0.1,
        dropout=0.1,
        clusters=100,
    )


def hubert_large_config(name: str = "hubert-large") -> HubertConfig:
    return HubertConfig(
        name=name,
        encoder_dim=1024,
        encoder_depth=24,
        encoder_heads=16,
        ffn_dim=4096,
        final_dim=768,
        extractor_mode="layer_norm",
        layer_norm_first=True,
        feature_gradient_scale=1.0,
        dropout=0.0,
        clusters=500,
    )


def hubert_xlarge_config(name: str = "hubert-xlarge") -> HubertConfig:
    return HubertConfig(
        name=name,
        encoder_dim=1280,
        encoder_depth=48,
        encoder_heads=16,
        ffn_dim=5120,
        final_dim=1024,
        extractor_mode="layer_norm",
        layer_norm_first=True,
        feature_gradient_scale=1.0,
        dropout=0.0,
        clusters=500,
    )


def hubert_debug_config() -> HubertConfig:
    """Trains on CPU in seconds: 2 s crops (100 frames), a 32-channel conv stack, 2 blocks of 64."""
    return HubertConfig(
        name="hubert-debug",
        encoder_dim=64,
        encoder_depth=2,
        encoder_heads=2,
        ffn_dim=128,
        final_dim=32,
        extractor_mode="group_norm",
        layer_norm_first=False,
        feature_gradient_scale=0.1,
        dropout=0.0,
        conv_channels=32,
        position_conv_kernel=16,
        position_conv_groups=4,
        clusters=100,
        crop_frames=100,
    )
