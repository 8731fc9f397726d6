"""Multi-head attention that mixes frames before pooling, with a choice of attention kernel.

Kernels take q, k, v shaped (batch, heads, frames, head_dim) plus `valid_frames` (batch, frames),
True = real frame, and return (batch, heads, frames, head_dim):
- "self": exact softmax attention through `scaled_dot_product_attention`, O(N^2 d);
- "performer": FAVOR+ random-feature approximation, O(N r d) (models/heads/performer.py);
- "agent": agent attention with a depthwise conv on V, O(N n d) (models/heads/agent_attention.py).
"""

from __future__ import annotations

from typing import Literal

import torch
from torch import nn

from models.heads.agent_attention import AgentAttention
from models.heads.performer import PerformerAttention

AttentionKind = Literal["self", "performer", "agent"]
ATTENTION_KINDS: tuple[str, ...] = ("self", "performer", "agent")


class SoftmaxAttention(nn.Module):
    """Exact softmax attention; padded keys are masked out."""

    def forward(
        self,
        query: torch.Tensor,
        key: torch.Tensor,
        value: torch.Tensor,
        valid_frames: torch.Tensor | None = None,
    ) -> torch.Tensor:
        key_mask = None if valid_frames is None else valid_frames[:, None, None, :]  # True = attend
        return nn.functional.scaled_dot_product_attention(query, key, value, attn_mask=key_mask)


def build_attention_kernel(
    kind: str,
    *,
    heads: int,
    head_dim: int,
    performer_features: int = 128,
    performer_redraw: bool = False,
    agent_pool_steps: int = 4,
) -> nn.Module:
    """The attention kernel module for `kind` ("self" | "performer" | "agent")."""
    if kind == "self":
        return SoftmaxAttention()
    if kind == "performer":
        return PerformerAttention(head_dim, num_features=performer_features, redraw_in_training=performer_redraw)
    if kind == "agent":
        return AgentAttention(heads, head_dim, pool_steps=agent_pool_steps)
    raise ValueError(f"Unknown attention {kind!r}; choose one of {', '.join(ATTENTION_KINDS)}.")


class MultiHeadFrameAttention(nn.Module):
    """Project frames to q, k, v, split into heads, apply the kernel, merge and project back."""

    def __init__(self, dim: int, heads: int, kernel: nn.Module) -> None:
        super().__init__()
        if dim % heads != 0:
            raise ValueError(f"attention width {dim} is not divisible by heads={heads}.")
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.kernel = kernel
        self.out = nn.Linear(dim, dim)

    def forward(self, frames: torch.Tensor, valid_frames: torch.Tensor | None = None) -> torch.Tensor:
        batch, num_frames, dim = frames.shape
        qkv = self.qkv(frames).reshape(batch, num_frames, 3, self.heads, dim // self.heads)
        query, key, value = qkv.permute(2, 0, 3, 1, 4)  # each (batch, heads, frames, head_dim)
        mixed = self.kernel(query, key, value, valid_frames)  # (batch, heads, frames, head_dim)
        return self.out(mixed.transpose(1, 2).reshape(batch, num_frames, dim))  # (batch, frames, dim)
