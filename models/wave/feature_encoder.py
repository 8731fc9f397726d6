"""wav2vec 2.0's convolutional feature encoder and feature projection (shared by HuBERT).

Raw 16 kHz audio -> 7 temporal convolutions (512 channels; kernels 10,3,3,3,3,2,2; strides
5,2,2,2,2,2,2; wav2vec 2.0, Baevski et al. 2020, Sec. 4.2) -> one 512-d frame every 320 samples
(20 ms) with a receptive field of 400 samples (25 ms) -> LayerNorm(512) -> Linear(512, d) -> dropout.

Input layout (the "waveform" front-end preset): a batch is (batch, frames, 320) float32, each
stored frame 320 consecutive samples, so `batch.reshape(batch, -1)` is the waveform. The conv
stack alone would give floor((S - 400) / 320) + 1 = frames - 1 outputs for S = 320 x frames
samples; 80 zeros at the end of the waveform (400 - 320) make it exactly `frames`, so frame t of
the encoder lines up with stored frame t (labels and masks are per stored frame).

Two normalisation modes (fairseq ConvFeatureExtractionModel, `extractor_mode`):
- "group_norm" (fairseq "default"; wav2vec 2.0 Base, HuBERT Base): a GroupNorm with one group per
  channel after the first convolution only, convolutions without bias.
- "layer_norm" (wav2vec 2.0 Large LV-60, HuBERT Large, the conformer models): a LayerNorm over
  channels after every convolution; wav2vec 2.0 LV-60 also gives the convolutions a bias
  (fairseq examples/wav2vec/config/pretraining/wav2vec2_large_librivox.yaml: conv_bias true).
GELU after every convolution in both modes.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

# (kernel, stride) of each convolution: wav2vec 2.0 Sec. 4.2 and fairseq's conv_feature_layers
# default "[(512, 10, 5)] + [(512, 3, 2)] * 4 + [(512, 2, 2)] * 2".
CONV_KERNELS_STRIDES: tuple[tuple[int, int], ...] = ((10, 5),) + ((3, 2),) * 4 + ((2, 2),) * 2
SAMPLES_PER_FRAME = 320  # product of the strides: 20 ms at 16 kHz
RECEPTIVE_FIELD_SAMPLES = 400  # 25 ms: r <- (r - 1) x stride + kernel, from the last layer back
END_PADDING_SAMPLES = RECEPTIVE_FIELD_SAMPLES - SAMPLES_PER_FRAME  # 80: one output per stored frame
EXTRACTOR_MODES = ("group_norm", "layer_norm")


def frames_to_waveform(batch: torch.Tensor) -> torch.Tensor:
    """(batch, frames, 320) -> (batch, frames x 320 + 80) waveform, 80 zeros appended."""
    if batch.ndim != 3 or batch.shape[-1] != SAMPLES_PER_FRAME:
        raise ValueError(
            f"waveform models expect a batch shaped (batch, frames, {SAMPLES_PER_FRAME}) from the "
            f"'waveform' front-end preset, got {tuple(batch.shape)}"
        )
    waveform = batch.reshape(batch.shape[0], -1)
    return nn.functional.pad(waveform, (0, END_PADDING_SAMPLES))


def conv_output_lengths(n_samples: int) -> list[int]:
    """Output positions of each convolution for a waveform of `n_samples` (no padding, stride s)."""
    lengths = []
    for kernel, stride in CONV_KERNELS_STRIDES:
        n_samples = (n_samples - kernel) // stride + 1
        lengths.append(n_samples)
    return lengths


class _ScaleGradient(torch.autograd.Function):
    """Identity forward; multiplies the gradient by `scale` (fairseq's GradMultiply)."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, scale: float) -> torch.Tensor:
        ctx.scale = scale
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> tuple[torch.Tensor, None]:
        return grad * ctx.scale, None


class _ChannelLayerNorm(nn.LayerNorm):
    """LayerNorm over the channels of a (batch, channels, time) tensor."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return super().forward(x.transpose(1, 2)).transpose(1, 2)


class ConvBlock(nn.Module):
    """Conv1d -> optional norm -> GELU."""

    def __init__(
        self, in_channels: int, out_channels: int, kernel: int, stride: int, *, norm: str | None, bias: bool
    ) -> None:
        super().__init__()
        self.conv = nn.Conv1d(in_channels, out_channels, kernel, stride=stride, bias=bias)
        nn.init.kaiming_normal_(self.conv.weight)  # fairseq ConvFeatureExtractionModel's init
        if norm == "group_norm":  # one group per channel: each channel normalised over time
            self.norm: nn.Module = nn.GroupNorm(out_channels, out_channels, affine=True)
        elif norm == "layer_norm":
            self.norm = _ChannelLayerNorm(out_channels)
        else:
            self.norm = nn.Identity()
        self.activation = nn.GELU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.activation(self.norm(self.conv(x)))


class FeatureProjection(nn.Module):
    """LayerNorm(channels) -> Linear(channels, dim) -> dropout (fairseq: layer_norm,
    post_extract_proj, dropout_input; torchaudio: FeatureProjection)."""

    def __init__(self, channels: int, dim: int, dropout: float) -> None:
        super().__init__()
        self.layer_norm = nn.LayerNorm(channels)
        self.linear = nn.Linear(channels, dim)
        self.dropout = nn.Dropout(dropout)

    def forward(self, conv: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """conv (batch, frames, channels) -> (normalized (.., channels), projected (.., dim))."""
        normalized = self.layer_norm(conv)
        return normalized, self.dropout(self.linear(normalized))


@dataclass(frozen=True)
class WaveFeatures:
    """What the feature encoder produces for a (batch, frames, 320) batch."""

    conv: torch.Tensor  # (batch, frames, channels) last conv block's output: wav2vec 2.0's feature penalty
    normalized: torch.Tensor  # (batch, frames, channels) after LayerNorm: the quantizer's input
    projected: torch.Tensor  # (batch, frames, dim) after Linear + dropout: the context encoder's input


class WaveFeatureEncoder(nn.Module):
    """The conv stack plus the feature projection; `gradient_scale` < 1 shrinks the gradient
    reaching the convolutions (fairseq feature_grad_mult: 0.1 for the Base models)."""

    def __init__(
        self,
        *,
        dim: int,
        conv_channels: int = 512,
        mode: str = "group_norm",
        conv_bias: bool = False,
        projection_dropout: float = 0.0,
        gradient_scale: float = 1.0,
    ) -> None:
        super().__init__()
        if mode not in EXTRACTOR_MODES:
            raise ValueError(f"extractor mode {mode!r}: use one of {EXTRACTOR_MODES}")
        if not 0.0 < gradient_scale <= 1.0:
            raise ValueError(f"gradient_scale={gradient_scale} must be in (0, 1]")
        self.gradient_scale = gradient_scale
        blocks = []
        in_channels = 1
        for index, (kernel, stride) in enumerate(CONV_KERNELS_STRIDES):
            norm = mode if (mode == "layer_norm" or index == 0) else None
            blocks.append(ConvBlock(in_channels, conv_channels, kernel, stride, norm=norm, bias=conv_bias))
            in_channels = conv_channels
        self.conv_layers = nn.ModuleList(blocks)
        self.projection = FeatureProjection(conv_channels, dim, projection_dropout)

    def forward(self, batch: torch.Tensor) -> WaveFeatures:
        """batch (batch, frames, 320) -> WaveFeatures with exactly `frames` frames."""
        x = frames_to_waveform(batch)[:, None]  # (batch, 1, samples + 80)
        for block in self.conv_layers:
            x = block(x)
        if self.gradient_scale != 1.0 and torch.is_grad_enabled():
            x = _ScaleGradient.apply(x, self.gradient_scale)
        conv = x.transpose(1, 2)  # (batch, frames, channels)
        normalized, projected = self.projection(conv)
        return WaveFeatures(conv=conv, normalized=normalized, projected=projected)

    def training_flops_per_sample(self, n_frames: int) -> float:
        """6 x weights x output positions for each conv block; the projection on every frame."""
        lengths = conv_output_lengths(n_frames * SAMPLES_PER_FRAME + END_PADDING_SAMPLES)
        flops = sum(
            6.0 * sum(p.numel() for p in block.parameters()) * length
            for block, length in zip(self.conv_layers, lengths, strict=True)
        )
        return flops + 6.0 * sum(p.numel() for p in self.projection.parameters()) * n_frames
