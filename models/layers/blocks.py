"""Encoder/decoder blocks: the pre-LN ViT block and the transformer++ block of AudioMAE++."""

from __future__ import annotations

import torch
from torch import nn

from models.layers.attention import SelfAttention
from models.layers.rope import RotaryAngles

LAYER_NORM_EPS = 1e-6  # MAE / timm ViT value, used by both families


class FeedForward(nn.Module):
    """Linear -> activation -> Linear with biases (width -> hidden -> width)."""

    def __init__(self, dim: int, hidden_dim: int, activation: type[nn.Module]) -> None:
        super().__init__()
        self.fc1 = nn.Linear(dim, hidden_dim)
        self.act = activation()
        self.fc2 = nn.Linear(hidden_dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(self.act(self.fc1(x)))


class SwiGLU(nn.Module):
    """silu(W_a x) * (W_b x), LayerNorm over the hidden units, then the output projection.

    hidden = int(8 * dim / 3) keeps the parameter count near a 4x GELU MLP (AudioMAE++).
    """

    def __init__(self, dim: int) -> None:
        super().__init__()
        hidden_dim = int(8 * dim / 3)
        self.gate = nn.Linear(dim, hidden_dim)
        self.value = nn.Linear(dim, hidden_dim)
        self.hidden_norm = nn.LayerNorm(hidden_dim, eps=LAYER_NORM_EPS)
        self.out = nn.Linear(hidden_dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        hidden = nn.functional.silu(self.gate(x)) * self.value(x)
        return self.out(self.hidden_norm(hidden))


class ViTBlock(nn.Module):
    """x + Attn(LN(x)); x + MLP(LN(x)) with a 4x GELU MLP."""

    def __init__(self, dim: int, n_heads: int, mlp_ratio: float = 4.0) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(dim, eps=LAYER_NORM_EPS)
        self.attn = SelfAttention(dim, n_heads)
        self.norm2 = nn.LayerNorm(dim, eps=LAYER_NORM_EPS)
        self.mlp = FeedForward(dim, int(dim * mlp_ratio), nn.GELU)

    def forward(self, x: torch.Tensor, rope: RotaryAngles | None = None) -> torch.Tensor:
        x = x + self.attn(self.norm1(x), rope)
        return x + self.mlp(self.norm2(x))


class TransformerPlusPlusBlock(nn.Module):
    """Macaron block of AudioMAE++, as the authors' code runs it.

    x = x + 0.5 * MLP(LN1(x))        MLP width -> 4 width -> width, SiLU (half-step)
    x = x + MHA(LN2(x))
    x = x + SwiGLU(LN(x))            the authors' code reuses LN2 here ("shared"); a third LN is
                                     created but unused, and the published parameter counts
                                     include it. swiglu_norm="own" feeds SwiGLU through that third
                                     LN instead (every parameter used, e.g. for DDP without
                                     find_unused_parameters), with the same parameter count.
    """

    def __init__(self, dim: int, n_heads: int, swiglu_norm: str = "shared") -> None:
        super().__init__()
        if swiglu_norm not in ("shared", "own"):
            raise ValueError(f"swiglu_norm={swiglu_norm!r}: use 'shared' (authors' code) or 'own'")
        self.swiglu_norm = swiglu_norm
        self.norm1 = nn.LayerNorm(dim, eps=LAYER_NORM_EPS)
        self.half_mlp = FeedForward(dim, 4 * dim, nn.SiLU)
        self.norm2 = nn.LayerNorm(dim, eps=LAYER_NORM_EPS)
        self.attn = SelfAttention(dim, n_heads)
        self.norm3 = nn.LayerNorm(dim, eps=LAYER_NORM_EPS)
        self.swiglu = SwiGLU(dim)

    def forward(self, x: torch.Tensor, rope: RotaryAngles | None = None) -> torch.Tensor:
        x = x + 0.5 * self.half_mlp(self.norm1(x))
        x = x + self.attn(self.norm2(x), rope)
        swiglu_input = self.norm2(x) if self.swiglu_norm == "shared" else self.norm3(x)
        return x + self.swiglu(swiglu_input)


def build_block(kind: str, dim: int, n_heads: int, *, swiglu_norm: str = "shared") -> nn.Module:
    """kind: "vit" (pre-LN ViT) or "transformer++" (AudioMAE++)."""
    if kind == "vit":
        return ViTBlock(dim, n_heads)
    if kind == "transformer++":
        return TransformerPlusPlusBlock(dim, n_heads, swiglu_norm)
    raise ValueError(f"block kind {kind!r}: use 'vit' or 'transformer++'")


def build_block_stack(kind: str, dim: int, n_heads: int, depth: int, *, swiglu_norm: str = "shared") -> nn.ModuleList:
    """`depth` blocks of one kind, as the patch encoder and the MAE decoder stack them."""
    return nn.ModuleList(build_block(kind, dim, n_heads, swiglu_norm=swiglu_norm) for _ in range(depth))
