"""Performer attention (FAVOR+): softmax attention approximated with positive random features.

softmax(Q K^T / sqrt(d)) V ~= D^-1 phi(Q) (phi(K)^T V), D = diag(phi(Q) phi(K)^T 1), with
phi(x) = r^-1/2 exp(W x - |x|^2 / 2) on x scaled by d^-1/4 and W's r rows drawn orthogonal in
blocks of d. The cost is O(N r d) instead of O(N^2 d); the error falls as r grows.
"""

from __future__ import annotations

import math

import torch
from torch import nn


def draw_orthogonal_features(
    num_features: int, head_dim: int, *, generator: torch.Generator | None = None
) -> torch.Tensor:
    """(num_features, head_dim) projection: orthogonal rows within each block of `head_dim` rows.

    Each row's norm is drawn from the chi distribution of a Gaussian vector, so every row is
    marginally N(0, I) (needed for an unbiased softmax kernel) while rows in a block stay orthogonal
    (which lowers the estimator's variance).
    """
    num_blocks = math.ceil(num_features / head_dim)
    gaussian = torch.randn(num_blocks, head_dim, head_dim, generator=generator)
    orthonormal, upper = torch.linalg.qr(gaussian)  # (blocks, d, d), orthonormal columns
    # Fixing the signs by R's diagonal makes Q uniformly (Haar) distributed, so every row
    # points in a uniformly random direction; raw QR output is not.
    orthonormal = orthonormal * torch.sign(torch.diagonal(upper, dim1=-2, dim2=-1)).unsqueeze(-2)
    directions = orthonormal.transpose(1, 2).reshape(num_blocks * head_dim, head_dim)[:num_features]  # (r, d)
    norms = torch.randn(num_features, head_dim, generator=generator).norm(dim=1, keepdim=True)  # (r, 1)
    return directions * norms


def random_feature_logits(x: torch.Tensor, projection: torch.Tensor) -> torch.Tensor:
    """log(r^1/2 phi(x)) = W x - |x|^2 / 2; x (..., n, d) already scaled by d^-1/4 -> (..., n, r)."""
    return x @ projection.T - x.square().sum(dim=-1, keepdim=True) / 2


def favor_attention(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    projection: torch.Tensor,
    valid_frames: torch.Tensor | None = None,
) -> torch.Tensor:
    """Approximate softmax attention; q, k, v (batch, heads, frames, head_dim) -> same shape.

    `valid_frames` (batch, frames), True = real: padded keys get zero features, so they drop out of
    both the numerator and the normalizer.
    """
    head_dim = query.shape[-1]
    scale = head_dim**-0.25  # splits the 1/sqrt(d) of softmax attention between q and k
    projection = projection.to(dtype=query.dtype, device=query.device)
    query_logits = random_feature_logits(query * scale, projection)  # (b, h, n, r)
    key_logits = random_feature_logits(key * scale, projection)  # (b, h, n, r)
    if valid_frames is not None:
        key_valid = valid_frames[:, None, :, None]  # (b, 1, n, 1)
        key_logits = key_logits.masked_fill(~key_valid, float("-inf"))  # exp -> zero features
        value = value.masked_fill(~key_valid, 0.0)  # padding may hold non-finite values

    # Subtracting a max before exp avoids overflow and changes nothing: a per-query constant
    # cancels between that query's numerator and normalizer, and one constant over all real keys
    # of a (batch, head) cancels for every query. The r^-1/2 factors cancel the same way.
    query_features = torch.exp(query_logits - query_logits.amax(dim=-1, keepdim=True).detach())
    key_features = torch.exp(key_logits - key_logits.amax(dim=(-2, -1), keepdim=True).detach())

    key_value = key_features.transpose(-2, -1) @ value  # (b, h, r, head_dim)
    key_sum = key_features.sum(dim=-2)  # (b, h, r)
    numerator = query_features @ key_value  # (b, h, n, head_dim)
    normalizer = (query_features @ key_sum.unsqueeze(-1)).clamp_min(1e-30)  # (b, h, n, 1)
    return numerator / normalizer


class PerformerAttention(nn.Module):
    """FAVOR+ attention with `num_features` orthogonal random features per head (shared by heads).

    With `redraw_in_training`, every training-mode call draws fresh features (the Performer paper's
    feature redrawing); in eval mode the stored features are used, so inference is deterministic.
    """

    def __init__(self, head_dim: int, num_features: int = 128, redraw_in_training: bool = False) -> None:
        super().__init__()
        if num_features < 1:
            raise ValueError(f"num_features must be >= 1, got {num_features}.")
        self.head_dim = head_dim
        self.num_features = num_features
        self.redraw_in_training = redraw_in_training
        # A buffer (saved in checkpoints) so that a trained head evaluates with its own features.
        self.register_buffer("projection", draw_orthogonal_features(num_features, head_dim))

    @torch.no_grad()
    def redraw_features(self) -> None:
        """Replace the random features with a fresh orthogonal draw."""
        fresh = draw_orthogonal_features(self.num_features, self.head_dim)
        self.projection.copy_(fresh.to(self.projection.device))

    def forward(
        self,
        query: torch.Tensor,
        key: torch.Tensor,
        value: torch.Tensor,
        valid_frames: torch.Tensor | None = None,
    ) -> torch.Tensor:
        if self.training and self.redraw_in_training:
            self.redraw_features()
        return favor_attention(query, key, value, self.projection, valid_frames)
