"""Attentive statistics pooling of frame features, with a padding mask.

Convention used by every language-ID module: `valid_frames` is a bool tensor (batch, frames) with
True = a real frame, False = padding appended at the end of the clip. `None` means "all real".
"""

from __future__ import annotations

import torch
from torch import nn


def valid_frames_from_lengths(lengths: torch.Tensor, num_frames: int) -> torch.Tensor:
    """(batch,) frame counts -> (batch, num_frames) bool mask, True for the first `lengths[b]` frames."""
    positions = torch.arange(num_frames, device=lengths.device)  # (frames,)
    return positions.unsqueeze(0) < lengths.unsqueeze(1)  # (batch, frames)


def check_valid_frames(valid_frames: torch.Tensor | None, frames: torch.Tensor) -> torch.Tensor:
    """Return a (batch, frames) bool mask for `frames` (batch, frames, dim); raise on bad masks.

    Padding must come after the real frames (right padding) because the agent tokens and the
    depthwise convolution read frames in order; every clip needs at least one real frame.
    """
    batch, num_frames = frames.shape[:2]
    if valid_frames is None:
        return torch.ones(batch, num_frames, dtype=torch.bool, device=frames.device)
    if valid_frames.shape != (batch, num_frames):
        raise ValueError(
            f"valid_frames has shape {tuple(valid_frames.shape)} but the frame features are "
            f"{tuple(frames.shape)}; pass a (batch, frames) bool mask (True = real frame)."
        )
    valid_frames = valid_frames.to(device=frames.device, dtype=torch.bool)
    if not bool(valid_frames.any(dim=1).all()):
        raise ValueError("valid_frames marks a clip with no real frame; drop empty clips before pooling.")
    # A right-padded row never turns from padding back to a real frame.
    if bool((valid_frames[:, 1:] & ~valid_frames[:, :-1]).any()):
        raise ValueError(
            "valid_frames has padding before a real frame; pad at the end of each clip "
            "(build the mask with valid_frames_from_lengths)."
        )
    return valid_frames


class AttentiveStatisticsPooling(nn.Module):
    """Attention-weighted mean and standard deviation over frames.

    alpha_t = softmax_t(v^T tanh(W h_t + b)) over real frames only; the output is
    [sum_t alpha_t h_t ; sqrt(sum_t alpha_t h_t^2 - mean^2)], shape (batch, 2 * dim).
    """

    def __init__(self, dim: int, bottleneck_dim: int = 64) -> None:
        super().__init__()
        self.score_hidden = nn.Linear(dim, bottleneck_dim)
        self.score_out = nn.Linear(bottleneck_dim, 1)

    def forward(self, frames: torch.Tensor, valid_frames: torch.Tensor | None = None) -> torch.Tensor:
        valid_frames = check_valid_frames(valid_frames, frames)
        # Zero the padding so that whatever it holds (even NaN) cannot leak through 0 * value.
        frames = frames.masked_fill(~valid_frames.unsqueeze(-1), 0.0)
        scores = self.score_out(torch.tanh(self.score_hidden(frames))).squeeze(-1)  # (batch, frames)
        scores = scores.masked_fill(~valid_frames, float("-inf"))
        weights = torch.softmax(scores, dim=1).unsqueeze(-1)  # (batch, frames, 1)
        mean = (weights * frames).sum(dim=1)  # (batch, dim)
        second_moment = (weights * frames.square()).sum(dim=1)  # (batch, dim)
        # The clamp keeps sqrt differentiable when a feature is constant over the clip.
        std = (second_moment - mean.square()).clamp_min(1e-6).sqrt()  # (batch, dim)
        return torch.cat([mean, std], dim=-1)  # (batch, 2 * dim)
