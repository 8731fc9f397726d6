"""Self-attention of the wav2vec2-conformer blocks: Transformer-XL relative positions or rotary.

Both follow fairseq's conformer attention (fairseq/modules/espnet_multihead_attention.py, the
ESPnet code it adapts; Hugging Face's Wav2Vec2ConformerSelfAttention copies it): q, k, v and
output projections with bias.

"rel_pos" (Transformer-XL, Dai et al. 2019, Sec. 3.3): score(i, j) =
[(q_i + u) . k_j + (q_i + v) . W_pos e(i - j)] / sqrt(d_head), with u, v learnable per head
(pos_bias_u, pos_bias_v), W_pos a bias-free linear map, and e(r) the sinusoidal table of relative
position r = i - j in [-(T-1), T-1] (sin on even, cos on odd features; fairseq
RelPositionalEncoding). ESPnet computes it with the "rel_shift" trick; here the (T, 2T-1) scores
are gathered at column (T - 1) - i + j, which is the same number.

"rope": the reference rotates the block's input, split into heads, *before* the q and k
projections (fairseq RotaryPositionMultiHeadedAttention rotates query/key and then calls
ESPNETMultiHeadedAttention, whose linear_q / linear_k come after; Hugging Face does the same), not
q and k after them as in RoFormer. Reproduced as the reference does it, with rotate-half rotary
angles of base 10000 over the head dimension (models/layers/rope.py).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from models.layers.rope import apply_rotary, rotary_angles

POSITION_KINDS = ("rel_pos", "rope")


def relative_position_table(n_frames: int, dim: int, *, device: torch.device | None = None) -> torch.Tensor:
    """(2T - 1, dim) sinusoids of relative positions T-1, T-2, ..., -(T-1) (row c holds r = T-1-c)."""
    positions = torch.arange(n_frames - 1, -n_frames, -1, dtype=torch.float32, device=device)[:, None]
    inverse_frequency = torch.exp(
        torch.arange(0, dim, 2, dtype=torch.float32, device=device) * -(math.log(10000.0) / dim)
    )
    table = torch.zeros(2 * n_frames - 1, dim, device=device)
    table[:, 0::2] = torch.sin(positions * inverse_frequency)
    table[:, 1::2] = torch.cos(positions * inverse_frequency)
    return table


def _split_heads(x: torch.Tensor, n_heads: int) -> torch.Tensor:
    batch, n_frames, dim = x.shape
    return x.view(batch, n_frames, n_heads, dim // n_heads).transpose(1, 2)  # (b, h, T, d_head)


class ConformerSelfAttention(nn.Module):
    def __init__(self, dim: int, n_heads: int, *, position: str, dropout: float = 0.0) -> None:
        super().__init__()
        if position not in POSITION_KINDS:
            raise ValueError(f"conformer position {position!r}: use one of {POSITION_KINDS}")
        if dim % n_heads:
            raise ValueError(f"width {dim} is not divisible by {n_heads} heads")
        self.n_heads, self.position, self.dropout = n_heads, position, dropout
        self.q, self.k, self.v, self.out = (nn.Linear(dim, dim) for _ in range(4))
        if position == "rel_pos":
            head_dim = dim // n_heads
            self.linear_pos = nn.Linear(dim, dim, bias=False)
            self.pos_bias_u = nn.Parameter(torch.empty(n_heads, head_dim))
            self.pos_bias_v = nn.Parameter(torch.empty(n_heads, head_dim))
            nn.init.xavier_uniform_(self.pos_bias_u)  # ESPnet / Hugging Face init
            nn.init.xavier_uniform_(self.pos_bias_v)

    def relative_position_scores(self, q: torch.Tensor) -> torch.Tensor:
        """q (b, h, T, d_head) -> (q_i + v) . W_pos e(i - j), (b, h, T, T), unscaled."""
        n_frames, dim = q.shape[2], q.shape[1] * q.shape[3]
        table = relative_position_table(n_frames, dim, device=q.device).to(q.dtype)
        projected = self.linear_pos(table).view(2 * n_frames - 1, self.n_heads, -1).transpose(0, 1)
        scores = (q + self.pos_bias_v[:, None]) @ projected.transpose(-1, -2)  # (b, h, T, 2T - 1)
        rows = torch.arange(n_frames, device=q.device)
        column = (n_frames - 1) - rows[:, None] + rows[None, :]  # r = i - j sits at (T-1) - r
        return torch.gather(scores, -1, column.expand(*scores.shape[:2], -1, -1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x (batch, frames, dim) -> (batch, frames, dim)."""
        query_key_input = x
        if self.position == "rope":
            head_dim = x.shape[-1] // self.n_heads
            positions = torch.arange(x.shape[1], device=x.device)[None, :, None]
            rotated = apply_rotary(_split_heads(x, self.n_heads), rotary_angles(positions, head_dim))
            query_key_input = rotated.transpose(1, 2).reshape(x.shape)
        q = _split_heads(self.q(query_key_input), self.n_heads)
        k = _split_heads(self.k(query_key_input), self.n_heads)
        v = _split_heads(self.v(x), self.n_heads)
        dropout = self.dropout if self.training else 0.0
        if self.position == "rel_pos":
            bias = self.relative_position_scores(q) / math.sqrt(q.shape[-1])
            y = F.scaled_dot_product_attention(q + self.pos_bias_u[:, None], k, v, attn_mask=bias, dropout_p=dropout)
        else:
            y = F.scaled_dot_product_attention(q, k, v, dropout_p=dropout)
        return self.out(y.transpose(1, 2).reshape(x.shape))
