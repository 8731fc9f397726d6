"""Rotary position embedding (RoPE), axial over one or more position axes.

For a 2-D patch grid the head dimension is split in two: the first half rotates with the time
index, the second with the frequency index. Rotation makes q.k depend only on the difference of
positions. A token given position 0 on every axis (the cls token) is left unrotated.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class RotaryAngles:
    cos: torch.Tensor  # (batch or 1, 1, n_tokens, head_dim): broadcast over heads
    sin: torch.Tensor
    n_axes: int


def rotary_angles(positions: torch.Tensor, head_dim: int, base: float = 10000.0) -> RotaryAngles:
    """positions (batch, n_tokens, n_axes) -> cos/sin tables for `apply_rotary`."""
    n_axes = positions.shape[-1]
    axis_dim = head_dim // n_axes
    if head_dim % n_axes != 0 or axis_dim % 2 != 0:
        raise ValueError(f"head_dim={head_dim} must split into {n_axes} even parts for RoPE")
    inv_freq = 1.0 / base ** (
        torch.arange(0, axis_dim, 2, dtype=torch.float32, device=positions.device) / axis_dim
    )  # (axis_dim / 2,)
    per_axis = []
    for axis in range(n_axes):
        angles = positions[..., axis, None].float() * inv_freq  # (batch, n, axis_dim / 2)
        per_axis.append(torch.cat([angles, angles], dim=-1))  # rotate-half layout
    angles = torch.cat(per_axis, dim=-1)[:, None]  # (batch, 1, n, head_dim)
    return RotaryAngles(cos=angles.cos(), sin=angles.sin(), n_axes=n_axes)


def _rotate_half_per_axis(x: torch.Tensor, n_axes: int) -> torch.Tensor:
    parts = x.chunk(n_axes, dim=-1)
    rotated = []
    for part in parts:
        first, second = part.chunk(2, dim=-1)
        rotated.append(torch.cat([-second, first], dim=-1))
    return torch.cat(rotated, dim=-1)


def apply_rotary(x: torch.Tensor, angles: RotaryAngles) -> torch.Tensor:
    """x (batch, heads, n_tokens, head_dim) rotated by the angles of its tokens."""
    rotated = _rotate_half_per_axis(x, angles.n_axes)
    return x * angles.cos.to(x.dtype) + rotated * angles.sin.to(x.dtype)
