"""The few-step training loop the "loss falls on speech" tests share: crops, AdamW steps, losses."""

from __future__ import annotations

import numpy as np
import torch


def random_crops(log_mel: np.ndarray, crop_frames: int, n_crops: int, seed: int) -> torch.Tensor:
    """`n_crops` seeded windows of `crop_frames` frames from one (frames, mel) clip: (n_crops, crop_frames, mel)."""
    starts = np.random.default_rng(seed).integers(0, log_mel.shape[0] - crop_frames, size=n_crops)
    return torch.from_numpy(np.stack([log_mel[s : s + crop_frames] for s in starts]))


def train_losses(model: torch.nn.Module, mel: torch.Tensor, *, steps: int, lr: float) -> list[float]:
    """The loss at each of `steps` AdamW steps on the same batch (no weight decay: only learning moves it)."""
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    losses = []
    for _ in range(steps):
        loss = model(mel).loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses


def assert_loss_fell(losses: list[float], *, to_at_most: float = 0.8) -> None:
    """The mean of the last five losses is at most `to_at_most` x the mean of the first five."""
    assert np.isfinite(losses).all(), f"non-finite loss: {losses}"
    first, last = np.mean(losses[:5]), np.mean(losses[-5:])
    assert last < to_at_most * first, f"loss {first:.3f} -> {last:.3f}"
