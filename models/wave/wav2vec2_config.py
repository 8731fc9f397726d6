"""Configuration of wav2vec 2.0 and wav2vec2-conformer: one dataclass, the paper sizes, debug sizes.

Sources: wav2vec 2.0 (Baevski et al. 2020) Sec. 2-4; fairseq's Wav2Vec2Config defaults and its
pretraining configs (examples/wav2vec/config/pretraining/wav2vec2_base_librispeech.yaml,
wav2vec2_large_librivox.yaml, wav2vec2_conformer_large_librivox.yaml). Where the study's Table IV
names a model, it is built as its original paper trained it (the study, Sec. IV-G: "followed the
settings in their original papers").

Masking in the project's terms: `mask_ratio` is the *expected* fraction of frames masked, which
span masking with overlaps makes 1 - (1 - p T / (T - M))^M (models/wave/span_masking.py; ~0.49 for
p = 0.065, M = 10, T = 500). Left None, it follows from `mask_start_probability`; set (the
pipeline's --mask-ratio, which also hands the model's own value back), p is solved from it, so
one number moves the masking either way.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from models.layers.masking import check_mask_ratio
from models.layers.patching import PatchGrid
from models.wave.feature_encoder import EXTRACTOR_MODES, SAMPLES_PER_FRAME
from models.wave.span_masking import SpanMaskedConfig

WAVEFORM_FRAME_HOP_MS = 1000.0 * SAMPLES_PER_FRAME / 16_000  # 20 ms per stored frame and per feature
BLOCKS = ("transformer", "rel_pos", "rope")  # the context network: transformer or conformer blocks


@dataclass(frozen=True, kw_only=True)
class Wav2Vec2Config(PatchGrid, SpanMaskedConfig):
    name: str
    # Input: the "waveform" preset, 320 samples per stored frame, one frame per "patch".
    frontend_preset: str = "waveform"
    n_mels: int = SAMPLES_PER_FRAME
    crop_frames: int = 500  # 10 s, the study's clip length (App. B)
    patch_frames: int = 1
    patch_bins: int = SAMPLES_PER_FRAME
    # Feature encoder (models/wave/feature_encoder.py).
    conv_channels: int = 512
    extractor_mode: str = "group_norm"
    conv_bias: bool = False
    feature_gradient_scale: float = 1.0  # fairseq feature_grad_mult: 0.1 Base, 1.0 Large
    # Context network.
    block: str = "transformer"
    encoder_dim: int = 768
    encoder_depth: int = 12
    encoder_heads: int = 12
    encoder_ffn_dim: int = 3072
    layer_norm_first: bool = False  # transformer blocks only: pre-LN (Large) or post-LN (Base)
    conformer_kernel: int = 31
    # Dropouts (fairseq names): dropout, attention_dropout, activation_dropout, dropout_input
    # (after the projection), dropout_features (on the quantizer's input).
    dropout: float = 0.1
    attention_dropout: float = 0.1
    activation_dropout: float = 0.0
    input_dropout: float = 0.1
    feature_dropout: float = 0.1
    # Quantizer (models/wave/gumbel_quantizer.py): G = 2 codebooks of V = 320 entries (Sec. 2).
    codebook_groups: int = 2
    codebook_entries: int = 320
    final_dim: int = 256  # projected context / target width: 256 Base, 768 Large (fairseq final_dim)
    temperature_start: float = 2.0
    temperature_floor: float = 0.5  # Sec. 4.2: 0.5 Base, 0.1 Large
    temperature_decay: float = 0.999995
    # Masking (models/wave/span_masking.py): p = 0.065, M = 10 (Sec. 3.1; fairseq mask_prob 0.65).
    mask_start_probability: float = 0.065
    mask_span_frames: int = 10
    mask_ratio: float | None = None  # expected masked fraction; None: from mask_start_probability
    # Objective (Sec. 3.2): K = 100 distractors, kappa = 0.1, alpha = 0.1 (fairseq num_negatives,
    # logit_temp, loss_weights[0]); feature penalty weight: fairseq loss_weights[1] (10 Base, 0 in
    # the Large LV-60 config, whose layer-norm extractor needs none).
    n_distractors: int = 100
    logit_temperature: float = 0.1
    diversity_weight: float = 0.1
    feature_penalty_weight: float = 10.0
    # Which context-network output `embed` returns: None = the last (after the final LayerNorm for
    # pre-LN stacks), k = block k's output, 1-based. The study takes one frame-level embedding per
    # model; the last layer is the default every family here uses.
    embed_layer: int | None = None

    def __post_init__(self) -> None:
        if (
            self.frontend_preset != "waveform"
            or self.n_mels != SAMPLES_PER_FRAME
            or self.patch_frames != 1
            or self.patch_bins != SAMPLES_PER_FRAME
        ):
            raise ValueError(
                f"{self.name}: wav2vec 2.0 reads the 'waveform' preset: n_mels = patch_bins = "
                f"{SAMPLES_PER_FRAME}, patch_frames = 1"
            )
        if self.extractor_mode not in EXTRACTOR_MODES:
            raise ValueError(f"{self.name}: extractor_mode={self.extractor_mode!r}, use one of {EXTRACTOR_MODES}")
        if self.block not in BLOCKS:
            raise ValueError(f"{self.name}: block={self.block!r}, use one of {BLOCKS}")
        if self.encoder_dim % self.encoder_heads or self.final_dim % self.codebook_groups:
            raise ValueError(
                f"{self.name}: encoder_dim={self.encoder_dim} must split into "
                f"{self.encoder_heads} heads and final_dim={self.final_dim} into "
                f"{self.codebook_groups} codebook groups"
            )
        if self.mask_ratio is not None:
            check_mask_ratio(self.mask_ratio, where=f"{self.name}: mask_ratio")
        if not 0.0 < self.mask_start_probability < 1.0:
            raise ValueError(
                f"{self.name}: mask_start_probability={self.mask_start_probability} must be "
                "in (0, 1) (the papers' p, not fairseq's mask_prob = p x span)"
            )
        if self.n_distractors < 1:
            raise ValueError(f"{self.name}: n_distractors={self.n_distractors} must be at least 1")
        if self.embed_layer is not None and not 1 <= self.embed_layer <= self.encoder_depth:
            raise ValueError(
                f"{self.name}: embed_layer={self.embed_layer}: use None (last) or a block "
                f"number in [1, {self.encoder_depth}]"
            )


def base_config(name: str = "wav2vec2-base") -> Wav2Vec2Config:
    """wav2vec 2.0 Base (Sec. 4.2; fairseq wav2vec2_base_librispeech.yaml): the defaults above."""
    return Wav2Vec2Config(name=name, feature_gradient_scale=0.1)  # feature_grad_mult 0.1


def large_config(name: str = "wav2vec2-large") -> Wav2Vec2Config:
    """wav2vec 2.0 Large as fairseq's wav2vec2_large_librivox.yaml (LV-60): layer-norm extractor
    with conv bias, pre-LN, 1024 x 24, 16 heads, FFN 4096, final_dim 768, tau floor 0.1, no
    dropout, no feature penalty."""
    return Wav2Vec2Config(
        name=name,
        extractor_mode="layer_norm",
        conv_bias=True,
        encoder_dim=1024,
        encoder_depth=24,
        encoder_heads=16,
        encoder_ffn_dim=4096,
        layer_norm_first=True,
        final_dim=768,
        temperature_floor=0.1,
        dropout=0.0,
        attention_dropout=0.0,
        input_dropout=0.0,
        feature_dropout=0.0,
        feature_penalty_weight=0.0,
    )


def conformer_large_config(position: str) -> Wav2Vec2Config:
    """wav2vec2-conformer Large (fairseq wav2vec2_conformer_large_librivox.yaml: the Large LV-60
    recipe with layer_type conformer, pos_enc_type rel_pos; the rope checkpoint differs only there)."""
    return dataclasses.replace(large_config(f"wav2vec2-conformer-large-{position.replace('_', '')}"), block=position)


def debug_config(name: str, block: str = "transformer") -> Wav2Vec2Config:
    """Trains on CPU in seconds: 2 s crops (100 frames), 32 conv channels, 64 x 2, 32-entry
    codebooks, 10 distractors, no dropout (the few-step tests should see learning, not noise).

    Every debug size, conformer ones included, takes Base's front end (group-norm extractor, feature
    penalty 10, tau floor 0.5). At this width the Large recipe's layer-norm extractor without the
    penalty trained erratically: over 4 seeds x 40 AdamW steps at lr 3e-3 the contrastive loss fell
    to 0.72-1.00 x its start and one run collapsed the codebook (code perplexity 2 of 64); with
    the penalty at 10 as well, the one run tried (lr 1e-3) collapsed (perplexity 7.6 of 64). With Base's front end: 0.63-0.77,
    perplexity 51-56. The conformer blocks, the object of these sizes, are the same either way."""
    conformer = block != "transformer"
    return Wav2Vec2Config(
        name=name,
        crop_frames=100,
        conv_channels=32,
        block=block,
        encoder_dim=64,
        encoder_depth=2,
        encoder_heads=4,
        encoder_ffn_dim=128,
        layer_norm_first=conformer,
        extractor_mode="group_norm",
        conv_bias=False,
        final_dim=32,
        codebook_entries=32,
        n_distractors=10,
        dropout=0.0,
        attention_dropout=0.0,
        input_dropout=0.0,
        feature_dropout=0.0,
    )
