"""wav2vec 2.0's context network: a convolutional relative position embedding and a transformer
(shared by HuBERT).

Sizes (wav2vec 2.0, Baevski et al. 2020, Sec. 4.2): Base 12 blocks, 768 wide, FFN 3072, 8 heads
in the paper's text but 12 in fairseq's Base config and checkpoint (encoder_attention_heads 12;
torchaudio's wav2vec2_base uses 12) - parameter counts do not depend on it; Large 24 blocks, 1024
wide, FFN 4096, 16 heads.

Position information comes from a grouped convolution over the frames instead of absolute
embeddings (Sec. 2, "relative positional embedding"): kernel 128, 16 groups, weight normalisation,
GELU (fairseq TransformerEncoder.pos_conv, conv_pos=128, conv_pos_groups=16); an even kernel with
padding 64 gives one output too many and the last is dropped (fairseq SamePad). Its output is
added to the input.

Norm placement follows fairseq TransformerEncoder: post-LN blocks (Base) get one LayerNorm on the
input, after the position convolution; pre-LN blocks ("layer_norm_first", Large LV-60 and HuBERT
Large) get it after the last block instead. Per-block outputs are kept for `embed_layer`
(k = output of block k, 1-based, before that final LayerNorm in the pre-LN case, as fairseq's
layer_results); the last entry of `ContextOutput.layers` is the encoder's output.

Not reproduced: fairseq's LayerDrop (Base config encoder_layerdrop 0.05) - skipped blocks leave
parameters without gradients, which the pipeline's DistributedDataParallel (no
find_unused_parameters) rejects.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

# fairseq Wav2Vec2Config: conv_pos=128, conv_pos_groups=16.
POSITION_CONV_KERNEL = 128
POSITION_CONV_GROUPS = 16
BERT_INIT_STD = 0.02  # fairseq init_bert_params: Linear weights ~ N(0, 0.02), biases 0


def init_linear_like_bert(module: nn.Module) -> None:
    """fairseq's init_bert_params for the Linear layers of `module` (apply with module.apply)."""
    if isinstance(module, nn.Linear):
        nn.init.normal_(module.weight, std=BERT_INIT_STD)
        if module.bias is not None:
            nn.init.zeros_(module.bias)


class ConvolutionalPositionEmbedding(nn.Module):
    """x (batch, frames, dim) -> the position term (batch, frames, dim) that is added to x."""

    def __init__(self, dim: int, kernel_size: int = POSITION_CONV_KERNEL, groups: int = POSITION_CONV_GROUPS) -> None:
        super().__init__()
        if dim % groups:
            raise ValueError(f"width {dim} is not divisible by {groups} position-conv groups")
        conv = nn.Conv1d(dim, dim, kernel_size, padding=kernel_size // 2, groups=groups)
        # fairseq: weights ~ N(0, sqrt(4 / (kernel x dim))) (dropout 0), bias 0, weight norm over dim 2
        nn.init.normal_(conv.weight, mean=0.0, std=math.sqrt(4.0 / (kernel_size * dim)))
        nn.init.zeros_(conv.bias)
        self.conv = nn.utils.parametrizations.weight_norm(conv, name="weight", dim=2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n_frames = x.shape[1]
        y = self.conv(x.transpose(1, 2))[:, :, :n_frames]  # even kernel: drop the extra last step
        return F.gelu(y).transpose(1, 2)


class WaveSelfAttention(nn.Module):
    """Multi-head self-attention with biases on q, k, v and the output (fairseq
    MultiheadAttention: 4 x (dim^2 + dim) parameters); dropout on the attention weights."""

    def __init__(self, dim: int, n_heads: int, dropout: float) -> None:
        super().__init__()
        if dim % n_heads:
            raise ValueError(f"width {dim} is not divisible by {n_heads} heads")
        self.n_heads = n_heads
        self.dropout = dropout
        self.qkv = nn.Linear(dim, 3 * dim)
        self.out = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, n_frames, dim = x.shape
        qkv = self.qkv(x).view(batch, n_frames, 3, self.n_heads, dim // self.n_heads)
        q, k, v = qkv.permute(2, 0, 3, 1, 4)  # each (batch, heads, frames, head_dim)
        dropout = self.dropout if self.training else 0.0
        y = F.scaled_dot_product_attention(q, k, v, dropout_p=dropout)
        return self.out(y.transpose(1, 2).reshape(batch, n_frames, dim))


class WaveTransformerLayer(nn.Module):
    """fairseq TransformerSentenceEncoderLayer: attention and a GELU FFN, each residual, with the
    LayerNorm after the residual (post-LN) or before the sublayer (pre-LN)."""

    def __init__(
        self,
        dim: int,
        n_heads: int,
        ffn_dim: int,
        *,
        layer_norm_first: bool,
        dropout: float = 0.0,
        attention_dropout: float = 0.0,
        activation_dropout: float = 0.0,
    ) -> None:
        super().__init__()
        self.layer_norm_first = layer_norm_first
        self.attention = WaveSelfAttention(dim, n_heads, attention_dropout)
        self.attention_norm = nn.LayerNorm(dim)
        self.fc1 = nn.Linear(dim, ffn_dim)
        self.fc2 = nn.Linear(ffn_dim, dim)
        self.final_norm = nn.LayerNorm(dim)
        self.dropout = nn.Dropout(dropout)
        self.activation_dropout = nn.Dropout(activation_dropout)

    def feed_forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.dropout(self.fc2(self.activation_dropout(F.gelu(self.fc1(x)))))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.layer_norm_first:
            x = x + self.dropout(self.attention(self.attention_norm(x)))
            return x + self.feed_forward(self.final_norm(x))
        x = self.attention_norm(x + self.dropout(self.attention(x)))
        return self.final_norm(x + self.feed_forward(x))


@dataclass(frozen=True)
class ContextOutput:
    """The context network's output and every block's output (for `embed_layer`)."""

    last: torch.Tensor  # (batch, frames, dim): the encoder output (final LayerNorm applied)
    layers: tuple[torch.Tensor, ...]  # block k's output at index k - 1

    def select(self, embed_layer: int | None) -> torch.Tensor:
        """None -> the encoder output; k -> block k's output (1-based)."""
        if embed_layer is None:
            return self.last
        if not 1 <= embed_layer <= len(self.layers):
            raise ValueError(f"embed_layer={embed_layer}: use None (last) or a block number in [1, {len(self.layers)}]")
        return self.layers[embed_layer - 1]


class WaveContextEncoder(nn.Module):
    """Position convolution + LayerNorm + dropout + transformer blocks (fairseq TransformerEncoder)."""

    def __init__(
        self,
        *,
        dim: int,
        depth: int,
        n_heads: int,
        ffn_dim: int,
        layer_norm_first: bool,
        dropout: float = 0.0,
        attention_dropout: float = 0.0,
        activation_dropout: float = 0.0,
        position_conv_kernel: int = POSITION_CONV_KERNEL,
        position_conv_groups: int = POSITION_CONV_GROUPS,
    ) -> None:
        super().__init__()
        self.layer_norm_first = layer_norm_first
        self.position_conv = ConvolutionalPositionEmbedding(dim, position_conv_kernel, position_conv_groups)
        self.layer_norm = nn.LayerNorm(dim)
        self.dropout = nn.Dropout(dropout)
        self.layers = nn.ModuleList(
            WaveTransformerLayer(
                dim,
                n_heads,
                ffn_dim,
                layer_norm_first=layer_norm_first,
                dropout=dropout,
                attention_dropout=attention_dropout,
                activation_dropout=activation_dropout,
            )
            for _ in range(depth)
        )
        self.layers.apply(init_linear_like_bert)

    def forward(self, x: torch.Tensor) -> ContextOutput:
        """x (batch, frames, dim) projected features -> ContextOutput."""
        x = x + self.position_conv(x)
        if not self.layer_norm_first:
            x = self.layer_norm(x)
        x = self.dropout(x)
        outputs = []
        for layer in self.layers:
            x = layer(x)
            outputs.append(x)
        last = self.layer_norm(x) if self.layer_norm_first else x
        return ContextOutput(last=last, layers=tuple(outputs))

    def training_flops_per_sample(self, n_frames: int) -> float:
        """6 x every weight x frames (the position conv has one output per frame, plus the
        dropped one, left out); attention scores are left out, as Kaplan's C = 6 N D."""
        return 6.0 * sum(p.numel() for p in self.parameters()) * n_frames
