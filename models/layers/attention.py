"""Multi-head self- and cross-attention, all through F.scaled_dot_product_attention."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from models.layers.rope import RotaryAngles, apply_rotary


def _split_heads(x: torch.Tensor, n_heads: int) -> torch.Tensor:
    batch, n_tokens, dim = x.shape
    return x.view(batch, n_tokens, n_heads, dim // n_heads).transpose(1, 2)  # (b, h, n, hd)


def _merge_heads(x: torch.Tensor) -> torch.Tensor:
    batch, n_heads, n_tokens, head_dim = x.shape
    return x.transpose(1, 2).reshape(batch, n_tokens, n_heads * head_dim)


class SelfAttention(nn.Module):
    """Fused qkv projection with bias (as timm's ViT), optional RoPE on q and k."""

    def __init__(self, dim: int, n_heads: int) -> None:
        super().__init__()
        if dim % n_heads != 0:
            raise ValueError(f"width {dim} is not divisible by {n_heads} heads")
        self.n_heads = n_heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor, rope: RotaryAngles | None = None) -> torch.Tensor:
        """x (batch, n, dim) -> (batch, n, dim)."""
        q, k, v = (_split_heads(t, self.n_heads) for t in self.qkv(x).chunk(3, dim=-1))
        if rope is not None:
            q, k = apply_rotary(q, rope), apply_rotary(k, rope)
        return self.proj(_merge_heads(F.scaled_dot_product_attention(q, k, v)))


class CrossAttention(nn.Module):
    """Queries from the decoder tokens; keys and values projected from encoder features.

    The key/value projection maps the encoder width to the decoder width, so no separate
    encoder-to-decoder embedding is needed.
    """

    def __init__(self, dim: int, context_dim: int, n_heads: int) -> None:
        super().__init__()
        if dim % n_heads != 0:
            raise ValueError(f"width {dim} is not divisible by {n_heads} heads")
        self.n_heads = n_heads
        self.q = nn.Linear(dim, dim)
        self.kv = nn.Linear(context_dim, 2 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, queries: torch.Tensor, context: torch.Tensor) -> torch.Tensor:
        """queries (batch, m, dim), context (batch, n, context_dim) -> (batch, m, dim)."""
        q = _split_heads(self.q(queries), self.n_heads)
        k, v = (_split_heads(t, self.n_heads) for t in self.kv(context).chunk(2, dim=-1))
        return self.proj(_merge_heads(F.scaled_dot_product_attention(q, k, v)))
