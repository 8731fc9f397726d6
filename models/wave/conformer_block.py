"""The conformer block of wav2vec2-conformer (Gulati et al. 2020, Sec. 2; fairseq
ConformerWav2Vec2EncoderLayer / ConformerEncoderLayer, Hugging Face Wav2Vec2ConformerEncoderLayer).

x = x + 1/2 FFN(x)                    macaron half-step feed-forward (Sec. 2.3)
x = x + MHSA(LayerNorm(x))            relative-position or rotary attention (conformer_attention.py)
x = x + Conv(x)                       LayerNorm -> pointwise to 2d -> GLU -> depthwise (kernel 31)
                                      -> BatchNorm -> Swish -> pointwise -> dropout (Sec. 2.2)
x = LayerNorm(x + 1/2 FFN(x))         second half-step feed-forward, then the block's final norm

FFN = LayerNorm -> Linear(d, 4d) -> Swish -> dropout -> Linear(4d, d) -> dropout (fairseq
FeedForwardModule with activation "swish"). The convolutions have no bias (fairseq
ConvolutionModule bias=False). Kernel 31: fairseq depthwise_conv_kernel_size default, Hugging Face
conv_depthwise_kernel_size 31 in facebook/wav2vec2-conformer-rel-pos-large's config.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from models.wave.conformer_attention import ConformerSelfAttention

DEPTHWISE_KERNEL = 31  # fairseq Wav2Vec2Config.depthwise_conv_kernel_size


class ConformerFeedForward(nn.Module):
    def __init__(self, dim: int, hidden_dim: int, dropout: float) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.fc1 = nn.Linear(dim, hidden_dim)
        self.fc2 = nn.Linear(hidden_dim, dim)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.dropout(self.fc2(self.dropout(F.silu(self.fc1(self.norm(x))))))


class ConformerConvModule(nn.Module):
    """(batch, frames, dim) -> (batch, frames, dim); the depthwise conv keeps the frame count."""

    def __init__(self, dim: int, kernel_size: int, dropout: float) -> None:
        super().__init__()
        if kernel_size % 2 == 0:
            raise ValueError(f"depthwise kernel {kernel_size} must be odd for 'same' padding")
        self.norm = nn.LayerNorm(dim)
        self.pointwise_in = nn.Conv1d(dim, 2 * dim, 1, bias=False)
        self.depthwise = nn.Conv1d(dim, dim, kernel_size, padding=kernel_size // 2, groups=dim, bias=False)
        self.batch_norm = nn.BatchNorm1d(dim)
        self.pointwise_out = nn.Conv1d(dim, dim, 1, bias=False)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.glu(self.pointwise_in(self.norm(x).transpose(1, 2)), dim=1)  # (batch, dim, frames)
        y = F.silu(self.batch_norm(self.depthwise(y)))
        return self.dropout(self.pointwise_out(y)).transpose(1, 2)


class ConformerBlock(nn.Module):
    def __init__(
        self,
        dim: int,
        n_heads: int,
        ffn_dim: int,
        *,
        position: str,
        kernel_size: int = DEPTHWISE_KERNEL,
        dropout: float = 0.0,
        attention_dropout: float = 0.0,
    ) -> None:
        super().__init__()
        self.ffn1 = ConformerFeedForward(dim, ffn_dim, dropout)
        self.attention_norm = nn.LayerNorm(dim)
        self.attention = ConformerSelfAttention(dim, n_heads, position=position, dropout=attention_dropout)
        self.attention_dropout = nn.Dropout(dropout)
        self.conv = ConformerConvModule(dim, kernel_size, dropout)
        self.ffn2 = ConformerFeedForward(dim, ffn_dim, dropout)
        self.final_norm = nn.LayerNorm(dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + 0.5 * self.ffn1(x)
        x = x + self.attention_dropout(self.attention(self.attention_norm(x)))
        x = x + self.conv(x)
        return self.final_norm(x + 0.5 * self.ffn2(x))
