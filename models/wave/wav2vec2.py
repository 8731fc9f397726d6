"""wav2vec 2.0 (Baevski et al. 2020) and wav2vec2-conformer: contrastive prediction of quantized
waveform features behind span masks. Sizes: `wav2vec2-{base,large}`,
`wav2vec2-conformer-large-{relpos,rope}` and debug sizes (models/wave/wav2vec2_config.py).

forward (fairseq Wav2Vec2Model.forward, pretraining branch):
1. feature encoder -> conv features z (the feature penalty: mean z^2), LayerNorm -> the
   quantizer's input; projection -> the context network's input;
2. span mask (p = 0.065, M = 10); masked frames of the projected features become `mask_embedding`;
3. context network -> c; the masked frames' c through `final_proj`; their LayerNormed features
   through the quantizer and `project_q` -> targets q;
4. loss = contrastive(c, q, 100 distractors) + 0.1 x diversity + weight x feature penalty,
   the terms fairseq's wav2vec criterion sums per masked frame and divides by their number.

Checked once against Hugging Face's Wav2Vec2ForPreTraining (transformers 4.46.3, not a
dependency) with its weights, the same mask and distractors, eval mode: equal projected context
vectors and contrastive loss (1.7429128 vs 1.7429129 per masked frame).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from models.config_overrides import apply_overrides
from models.interface import MaskedOutput, ModelSpec
from models.registry import register_model
from models.wave.conformer_context import ConformerContextEncoder
from models.wave.context import WaveContextEncoder
from models.wave.contrastive_loss import (
    contrastive_logits,
    contrastive_loss,
    gather_distractors,
    sample_distractor_indices,
)
from models.wave.encoder import WaveEncoder
from models.wave.feature_encoder import WaveFeatureEncoder
from models.wave.gumbel_quantizer import (
    GumbelProductQuantizer,
    TemperatureSchedule,
    diversity_penalty,
)
from models.wave.span_masking import span_mask
from models.wave.wav2vec2_config import (
    WAVEFORM_FRAME_HOP_MS,
    Wav2Vec2Config,
    base_config,
    conformer_large_config,
    debug_config,
    large_config,
)


def build_context_network(config: Wav2Vec2Config) -> nn.Module:
    if config.block == "transformer":
        return WaveContextEncoder(
            dim=config.encoder_dim,
            depth=config.encoder_depth,
            n_heads=config.encoder_heads,
            ffn_dim=config.encoder_ffn_dim,
            layer_norm_first=config.layer_norm_first,
            dropout=config.dropout,
            attention_dropout=config.attention_dropout,
            activation_dropout=config.activation_dropout,
        )
    return ConformerContextEncoder(
        dim=config.encoder_dim,
        depth=config.encoder_depth,
        n_heads=config.encoder_heads,
        ffn_dim=config.encoder_ffn_dim,
        position=config.block,
        kernel_size=config.conformer_kernel,
        dropout=config.dropout,
        attention_dropout=config.attention_dropout,
    )


@dataclass(frozen=True)
class Wav2Vec2Losses:
    total: torch.Tensor
    contrastive: torch.Tensor
    diversity: torch.Tensor  # (G V - perplexity) / (G V), unweighted
    feature_penalty: torch.Tensor  # mean squared conv feature, unweighted
    predictions: torch.Tensor  # (batch, n_masked, final_dim) projected context at masked frames
    logits: torch.Tensor  # (batch, n_masked, 1 + K), the positive first


class Wav2Vec2(nn.Module):
    def __init__(self, config: Wav2Vec2Config) -> None:
        super().__init__()
        self.config = config
        self.spec = ModelSpec(
            name=config.name,
            n_mels=config.n_mels,
            crop_frames=config.crop_frames,
            patch_frames=config.patch_frames,
            patch_bins=config.patch_bins,
            mask_ratio=config.expected_mask_ratio,
            frontend_preset=config.frontend_preset,
            embed_dim=config.encoder_dim,
            frame_hop_ms=WAVEFORM_FRAME_HOP_MS,
        )
        features = WaveFeatureEncoder(
            dim=config.encoder_dim,
            conv_channels=config.conv_channels,
            mode=config.extractor_mode,
            conv_bias=config.conv_bias,
            projection_dropout=config.input_dropout,
            gradient_scale=config.feature_gradient_scale,
        )
        self.encoder = WaveEncoder(features, build_context_network(config))
        self.mask_embedding = nn.Parameter(torch.rand(config.encoder_dim))  # fairseq mask_emb: uniform_()
        self.feature_dropout = nn.Dropout(config.feature_dropout)
        self.quantizer = GumbelProductQuantizer(
            config.conv_channels,
            groups=config.codebook_groups,
            entries=config.codebook_entries,
            codevector_dim=config.final_dim,
            temperature=TemperatureSchedule(
                start=config.temperature_start, floor=config.temperature_floor, decay_per_step=config.temperature_decay
            ),
        )
        self.project_q = nn.Linear(config.final_dim, config.final_dim)
        self.final_proj = nn.Linear(config.encoder_dim, config.final_dim)

    def draw_mask(
        self, batch: int, n_frames: int, device: torch.device, generator: torch.Generator | None = None
    ) -> torch.Tensor:
        return span_mask(
            batch,
            n_frames,
            start_probability=self.config.span_start_probability,
            span_frames=self.config.mask_span_frames,
            generator=generator,
            device=device,
        )

    def compute_losses(
        self, batch: torch.Tensor, mask: torch.Tensor, generator: torch.Generator | None = None
    ) -> Wav2Vec2Losses:
        """batch (batch, frames, 320), mask (batch, frames) bool with the same count per row."""
        features, context = self.encoder(batch, mask, self.mask_embedding)
        n_batch, n_masked = batch.shape[0], int(mask[0].sum())
        quantizer_input = self.feature_dropout(features.normalized)[mask].view(n_batch, n_masked, -1)
        quantized = self.quantizer(quantizer_input)
        targets = self.project_q(quantized.vectors)  # (batch, M, final_dim)
        predictions = self.final_proj(context.last[mask].view(n_batch, n_masked, -1))
        indices = sample_distractor_indices(
            n_batch, n_masked, self.config.n_distractors, generator=generator, device=batch.device
        )
        logits = contrastive_logits(
            predictions, targets, gather_distractors(targets, indices), self.config.logit_temperature
        )
        contrastive = contrastive_loss(logits)
        diversity = diversity_penalty(quantized.prob_perplexity, self.quantizer.n_codewords)
        feature_penalty = features.conv.float().pow(2).mean()
        total = (
            contrastive
            + self.config.diversity_weight * diversity
            + self.config.feature_penalty_weight * feature_penalty
        )
        return Wav2Vec2Losses(
            total=total,
            contrastive=contrastive,
            diversity=diversity,
            feature_penalty=feature_penalty,
            predictions=predictions,
            logits=logits,
        )

    def forward(self, batch: torch.Tensor) -> MaskedOutput:
        """batch (batch, crop frames, 320) -> MaskedOutput; pred holds the projected context at
        masked frames (zero elsewhere). Each training forward advances the temperature one step
        (one forward per optimizer update; with gradient accumulation it decays per micro-batch)."""
        mask = self.draw_mask(batch.shape[0], batch.shape[1], batch.device)
        losses = self.compute_losses(batch, mask)
        if self.training:
            self.quantizer.advance_step()
        pred = losses.predictions.new_zeros(*mask.shape, self.config.final_dim).masked_scatter(
            mask[..., None], losses.predictions
        )  # row-major: masked frames in time order, as `context.last[mask]` took them
        float_mask = mask.to(losses.predictions.dtype)
        return MaskedOutput(loss=losses.total, pred=pred, mask=float_mask, scored=float_mask)

    def set_step(self, step: int) -> None:
        """Set the optimizer-update count the Gumbel temperature is annealed by."""
        self.quantizer.set_step(step)

    def embed(self, batch: torch.Tensor) -> torch.Tensor:
        """batch (batch, frames, 320) -> (batch, frames, encoder_dim), unmasked; the layer is
        config.embed_layer (None: the context network's output). Any number of frames."""
        _, context = self.encoder(batch)
        return context.select(self.config.embed_layer)

    def no_weight_decay_names(self) -> set[str]:
        """The mask embedding and the Transformer-XL position biases (biases and norms: by rule)."""
        return {
            name
            for name, _ in self.named_parameters()
            if name == "mask_embedding" or name.endswith(("pos_bias_u", "pos_bias_v"))
        }

    def training_flops_per_sample(self) -> float:
        """6 N per position: the encoder on every frame (convs on their own output positions),
        the quantizer, project_q and final_proj on the expected number of masked frames."""
        n_frames = self.config.crop_frames
        n_masked = round(self.spec.mask_ratio * n_frames)
        flops = self.encoder.features.training_flops_per_sample(n_frames)
        flops += self.encoder.context.training_flops_per_sample(n_frames)
        heads = (self.quantizer, self.project_q, self.final_proj)
        return flops + 6.0 * sum(p.numel() for head in heads for p in head.parameters()) * n_masked


def _register() -> None:
    sizes = {
        "wav2vec2-base": (base_config(), "95M (study Table IV; wav2vec 2.0 Base)"),
        "wav2vec2-large": (large_config(), "317M (study Table IV; wav2vec 2.0 Large LV-60)"),
        # Table IV's 317M repeats wav2vec 2.0 Large's; these architectures have 612.1M / 586.9M
        # (the released fp32 checkpoints, 2.48 / 2.38 GB, add an unused 8.4M position conv)
        "wav2vec2-conformer-large-relpos": (
            conformer_large_config("rel_pos"),
            "317M in study Table IV (the architecture: 612.1M)",
        ),
        "wav2vec2-conformer-large-rope": (
            conformer_large_config("rope"),
            "317M in study Table IV (the architecture: 586.9M)",
        ),
        "wav2vec2-debug": (debug_config("wav2vec2-debug"), ""),
        "wav2vec2-conformer-debug-relpos": (debug_config("wav2vec2-conformer-debug-relpos", "rel_pos"), ""),
        "wav2vec2-conformer-debug-rope": (debug_config("wav2vec2-conformer-debug-rope", "rope"), ""),
    }
    for name, (config, paper) in sizes.items():
        register_model(
            name,
            lambda _config=config, **overrides: Wav2Vec2(apply_overrides(_config, overrides)),
            paper_parameters=paper,
        )


_register()
