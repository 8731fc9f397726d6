"""Language-ID probe head: frame mixing by attention, attentive statistics pooling, linear classifier.

Usage (frame features from any encoder's `embed`):

    head = LanguageIdHead(encoder_dim, num_languages, attention="performer")
    logits = head(frames, valid_frames)  # frames (batch, frames, dim); valid_frames (batch, frames)
    loss = torch.nn.functional.cross_entropy(logits, labels)

`valid_frames` is True for real frames and False for padding appended at the end of a clip
(`valid_frames_from_lengths` builds it); omit it when no clip is padded. The paper's setting is
4 heads, attention width 64, dropout 0.2, trained with Adam at lr 1e-4.
"""

from __future__ import annotations

import torch
from torch import nn

from models.heads.attentive_pooling import (
    AttentiveStatisticsPooling,
    check_valid_frames,
)
from models.heads.frame_attention import (
    AttentionKind,
    MultiHeadFrameAttention,
    build_attention_kernel,
)


class LanguageIdHead(nn.Module):
    """(batch, frames, dim) frame features -> (batch, num_classes) logits.

    attention: "self" (exact softmax), "performer" (FAVOR+ with `performer_features` random
    features, redrawn every training step when `performer_redraw`), or "agent" (agent attention
    with `agent_pool_steps` pairwise pooling steps). `attention_dim` is the total width of the
    attention block, split evenly over `heads`.
    """

    def __init__(
        self,
        dim: int,
        num_classes: int,
        attention: AttentionKind = "self",
        heads: int = 4,
        attention_dim: int = 64,
        dropout: float = 0.2,
        *,
        performer_features: int = 128,
        performer_redraw: bool = False,
        agent_pool_steps: int = 4,
    ) -> None:
        super().__init__()
        if num_classes < 1:
            raise ValueError(f"num_classes must be >= 1, got {num_classes}.")
        if attention_dim % heads != 0:
            raise ValueError(f"attention_dim={attention_dim} must be divisible by heads={heads}.")
        self.attention_kind = attention
        kernel = build_attention_kernel(
            attention,
            heads=heads,
            head_dim=attention_dim // heads,
            performer_features=performer_features,
            performer_redraw=performer_redraw,
            agent_pool_steps=agent_pool_steps,
        )
        self.input_proj = nn.Linear(dim, attention_dim)
        self.norm = nn.LayerNorm(attention_dim)
        self.attention = MultiHeadFrameAttention(attention_dim, heads, kernel)
        self.dropout = nn.Dropout(dropout)
        self.pooling = AttentiveStatisticsPooling(attention_dim, bottleneck_dim=attention_dim)
        self.classifier = nn.Linear(2 * attention_dim, num_classes)

    def forward(self, frames: torch.Tensor, valid_frames: torch.Tensor | None = None) -> torch.Tensor:
        if frames.dim() != 3:
            raise ValueError(f"frames must be (batch, frames, dim), got shape {tuple(frames.shape)}.")
        valid_frames = check_valid_frames(valid_frames, frames)
        # Padding may hold anything (even NaN); zero it so it cannot reach real frames via 0 * value.
        frames = frames.masked_fill(~valid_frames.unsqueeze(-1), 0.0)
        hidden = self.input_proj(frames)  # (batch, frames, attention_dim)
        hidden = hidden + self.dropout(self.attention(self.norm(hidden), valid_frames))
        pooled = self.pooling(hidden, valid_frames)  # (batch, 2 * attention_dim)
        return self.classifier(self.dropout(pooled))  # (batch, num_classes)
