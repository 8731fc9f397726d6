"""A third-party-style HEAR module for tests: a fixed random projection of the mean log spectrum.

Plain numpy and torch, no download. It runs at 32 kHz, so scoring it exercises the resampling of
16 kHz task audio and of the RankMe pool's source files. `load_model(path)` reads the projection
from a .npy file (the `--model-file`); without a path it draws one with seed 0.
"""

from __future__ import annotations

import numpy as np
import torch

SAMPLE_RATE_HZ = 32_000
EMBEDDING_SIZE = 24
FFT_SAMPLES = 1024  # 32 ms at 32 kHz
HOP_SAMPLES = 512


class ToyModel(torch.nn.Module):
    def __init__(self, projection: np.ndarray) -> None:
        super().__init__()
        self.sample_rate = SAMPLE_RATE_HZ
        self.scene_embedding_size = int(projection.shape[1])
        self.projection = torch.from_numpy(projection.astype(np.float32))


def random_projection(seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((FFT_SAMPLES // 2 + 1, EMBEDDING_SIZE)).astype(np.float32)


def load_model(model_file_path: str = "") -> ToyModel:
    return ToyModel(np.load(model_file_path) if model_file_path else random_projection())


def get_scene_embeddings(audio: torch.Tensor, model: ToyModel) -> torch.Tensor:
    """(n_sounds, n_samples) at 32 kHz -> (n_sounds, 24): log(1 + mean |STFT|) @ projection."""
    spectrum = torch.stft(
        audio, n_fft=FFT_SAMPLES, hop_length=HOP_SAMPLES, window=torch.hann_window(FFT_SAMPLES), return_complex=True
    ).abs()  # (n, bins, frames)
    return torch.log1p(spectrum.mean(dim=2)) @ model.projection
