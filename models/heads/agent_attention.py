"""Agent attention: a few agent tokens pooled from the queries relay information between frames.

With N frames and p pooling steps there are n = floor(N / 2^p) agents G (each the mean of 2^p
consecutive queries, i.e. p pairwise average-pooling steps). Agents first gather from the keys,
V_a = softmax(G K^T / sqrt(d)) V, then each frame reads the agents, C = softmax(Q G^T / sqrt(d)) V_a;
a depthwise convolution over V along time is added to C to restore local detail the n agents
cannot carry. Cost O(N n d) instead of O(N^2 d).

Padding: agents count only real frames (n = floor(real frames / 2^p), at least 1), padded keys are
masked and padded values are zeroed before the convolution, so real frames' outputs do not depend
on how much padding follows them.
"""

from __future__ import annotations

import math

import torch
from torch import nn


def pool_agent_tokens(
    query: torch.Tensor, valid_frames: torch.Tensor, pool_steps: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Average blocks of 2^p consecutive real queries into agent tokens.

    query (batch, heads, frames, head_dim), valid_frames (batch, frames) right-padded ->
    agents (batch, heads, blocks, head_dim) and valid_agents (batch, blocks): agent j of a clip is
    valid when j < max(1, floor(real frames / 2^p)). Frames after the last full block are not
    pooled (as floor-mode average pooling drops them); a clip shorter than one block gets one agent
    from all its frames.
    """
    block = 2**pool_steps
    batch, heads, num_frames, head_dim = query.shape
    num_blocks = math.ceil(num_frames / block)
    pad = num_blocks * block - num_frames
    weights = valid_frames.to(query.dtype)  # (batch, frames)
    padded_query = nn.functional.pad(query * weights[:, None, :, None], (0, 0, 0, pad))
    padded_weights = nn.functional.pad(weights, (0, pad))  # (batch, blocks * block)

    block_sums = padded_query.reshape(batch, heads, num_blocks, block, head_dim).sum(dim=3)
    block_counts = padded_weights.reshape(batch, num_blocks, block).sum(dim=2)  # (batch, blocks)
    agents = block_sums / block_counts.clamp_min(1.0)[:, None, :, None]  # (b, h, blocks, d)

    num_agents = (valid_frames.sum(dim=1) // block).clamp_min(1)  # (batch,)
    valid_agents = torch.arange(num_blocks, device=query.device)[None, :] < num_agents[:, None]
    return agents, valid_agents


def masked_softmax_attention(
    query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, valid_keys: torch.Tensor
) -> torch.Tensor:
    """softmax(q k^T / sqrt(d)) v over the keys marked valid (batch, keys); q (b, h, n, d)."""
    key_mask = valid_keys[:, None, None, :]  # (batch, 1, 1, keys): True = attend
    return nn.functional.scaled_dot_product_attention(query, key, value, attn_mask=key_mask)


class AgentAttention(nn.Module):
    """Agent attention over (batch, heads, frames, head_dim) with a depthwise conv on V."""

    def __init__(self, heads: int, head_dim: int, pool_steps: int = 4, conv_kernel_frames: int = 3) -> None:
        super().__init__()
        if pool_steps < 0:
            raise ValueError(f"pool_steps must be >= 0, got {pool_steps}.")
        if conv_kernel_frames % 2 != 1:
            raise ValueError(f"conv_kernel_frames must be odd to keep frames aligned, got {conv_kernel_frames}.")
        self.heads = heads
        self.pool_steps = pool_steps
        channels = heads * head_dim
        # Zero padding at the ends matches zeroed padded frames, which keeps padding invariance.
        self.value_conv = nn.Conv1d(
            channels, channels, conv_kernel_frames, padding=conv_kernel_frames // 2, groups=channels
        )

    def forward(
        self,
        query: torch.Tensor,
        key: torch.Tensor,
        value: torch.Tensor,
        valid_frames: torch.Tensor | None = None,
    ) -> torch.Tensor:
        batch, heads, num_frames, head_dim = query.shape
        if valid_frames is None:
            valid_frames = torch.ones(batch, num_frames, dtype=torch.bool, device=query.device)
        value = value.masked_fill(~valid_frames[:, None, :, None], 0.0)

        agents, valid_agents = pool_agent_tokens(query, valid_frames, self.pool_steps)  # (b, h, n, d)
        agent_values = masked_softmax_attention(agents, key, value, valid_frames)  # (b, h, n, d)
        mixed = masked_softmax_attention(query, agents, agent_values, valid_agents)  # (b, h, N, d)

        channels_first = value.transpose(1, 2).reshape(batch, num_frames, heads * head_dim).transpose(1, 2)
        local = self.value_conv(channels_first)  # (batch, heads * head_dim, frames)
        local = local.transpose(1, 2).reshape(batch, num_frames, heads, head_dim).transpose(1, 2)
        return mixed + local  # (b, h, N, d)
