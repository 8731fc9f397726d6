"""Absolute position embeddings: fixed sin-cos tables (buffers) and learnable tables (parameters).

All tables are laid out in token order (time-major), shaped (1, n_patches, dim), so a crop
shorter than the training crop uses a prefix of the table. "learnable_time_freq" (Dasheng's
encoder: `time_pos_embed` (1, dim, 1, T) plus `freq_pos_embed` (1, dim, F, 1)) learns one vector
per time step and one per frequency patch; a token's position is their sum.
"""

from __future__ import annotations

import torch
from torch import nn

from models.layers.patching import PatchGrid


def sincos_1d(positions: torch.Tensor, dim: int) -> torch.Tensor:
    """positions (n,) -> (n, dim): sin(p * w_k) then cos(p * w_k), w_k = 10000^(-k / (dim / 2))."""
    if dim % 2 != 0:
        raise ValueError(f"sin-cos embedding needs an even dim, got {dim}")
    omega = 1.0 / 10000 ** (torch.arange(dim // 2, dtype=torch.float64) / (dim / 2))
    angles = positions.to(torch.float64)[:, None] * omega[None, :]  # (n, dim/2)
    return torch.cat([torch.sin(angles), torch.cos(angles)], dim=1).float()


def sincos_2d(n_time: int, n_freq: int, dim: int) -> torch.Tensor:
    """(n_time * n_freq, dim) time-major: first half of dim encodes time, second half frequency."""
    if dim % 4 != 0:
        raise ValueError(f"2-D sin-cos embedding needs dim divisible by 4, got {dim}")
    time_index = torch.arange(n_time).repeat_interleave(n_freq)  # (n_time * n_freq,)
    freq_index = torch.arange(n_freq).repeat(n_time)
    return torch.cat([sincos_1d(time_index, dim // 2), sincos_1d(freq_index, dim // 2)], dim=1)


class PositionEmbedding(nn.Module):
    """Adds a (1, n_patches, dim) table to patch tokens; `kind` is "learnable",
    "learnable_time_freq", "sincos2d" or "sincos1d"."""

    def __init__(self, *, kind: str, n_time: int, n_freq: int, dim: int) -> None:
        super().__init__()
        self.kind = kind
        self.n_time, self.n_freq, self.dim = n_time, n_freq, dim
        n_patches = n_time * n_freq
        # Learnable tables start at N(0, 0.02^2): trunc_normal_'s default cut at +-2 lies 100
        # standard deviations out, so this is Dasheng's `torch.randn(...) * .02`.
        if kind == "learnable":
            self.table = nn.Parameter(torch.zeros(1, n_patches, dim))
            nn.init.trunc_normal_(self.table, std=0.02)
        elif kind == "learnable_time_freq":
            self.time_table = nn.Parameter(torch.zeros(n_time, dim))
            self.freq_table = nn.Parameter(torch.zeros(n_freq, dim))
            nn.init.trunc_normal_(self.time_table, std=0.02)
            nn.init.trunc_normal_(self.freq_table, std=0.02)
        elif kind == "sincos2d":
            self.register_buffer("table", sincos_2d(n_time, n_freq, dim)[None], persistent=False)
        elif kind == "sincos1d":
            table = sincos_1d(torch.arange(n_patches), dim)[None]
            self.register_buffer("table", table, persistent=False)
        else:
            raise ValueError(
                f"position embedding kind {kind!r}: use learnable, learnable_time_freq, sincos2d or sincos1d"
            )

    @classmethod
    def over_grid(cls, kind: str, grid: PatchGrid, dim: int, *, rows: int | None = None) -> PositionEmbedding:
        """One position per patch of `grid` (a model config): what every encoder and decoder uses.

        `rows`: a longer learnable table (crops use its prefix): time rows for "learnable_time_freq",
        all rows for "learnable" (Dasheng's 252 / 253 over 250-patch crops)."""
        n_time, n_freq = grid.n_time_patches, grid.n_freq_patches
        if rows is not None:
            if kind == "learnable_time_freq":
                n_time = rows
            elif kind == "learnable" and rows % n_freq == 0:
                n_time = rows // n_freq
            elif kind == "learnable" and n_freq == 1:
                n_time = rows
            else:
                raise ValueError(f"{rows} position rows need a learnable table over whole time steps, not {kind!r}")
        return cls(kind=kind, n_time=n_time, n_freq=n_freq, dim=dim)

    @property
    def n_positions(self) -> int:
        return self.n_time * self.n_freq

    def full_table(self) -> torch.Tensor:
        """(1, n_positions, dim) in token order, whatever the kind stores."""
        if self.kind == "learnable_time_freq":
            summed = self.time_table[:, None, :] + self.freq_table[None, :, :]  # (n_time, n_freq, dim)
            return summed.reshape(1, self.n_positions, self.dim)  # time-major, as the tokens
        return self.table

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        """tokens (batch, n, dim) in patch order, n <= n_positions."""
        return tokens + self.full_table()[:, : tokens.shape[1]]

    def at(self, ids: torch.Tensor) -> torch.Tensor:
        """ids (batch, m) patch indices -> (batch, m, dim) their embeddings."""
        table = self.full_table()[0]  # (n_positions, dim)
        return table[ids]
