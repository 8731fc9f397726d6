"""Cut a (batch, 1, time, mel) spectrogram into patches and put it back together.

Time and frequency have separate patch sizes (the study's MAE: 4 x 64, AudioMAE++: 4 x 16).
Tokens are time-major (see models/interface.py); each patch is flattened time-major too.
"""

from __future__ import annotations

import torch

# Time between spectrogram frames of each front-end preset (pipeline/audio/frontend.py): all use a
# 160-sample hop at 16 kHz. Every model family's patch grid turns frames into ms with it; kept in
# models/ so models/ stays free of pipeline imports.
FRONTEND_HOP_MS = {"audiomae": 10.0, "dasheng": 10.0, "ssast": 10.0}


def check_patchable(time_frames: int, mel_bins: int, patch_frames: int, patch_bins: int) -> None:
    """Raise a clear error when the spectrogram does not tile into whole patches."""
    if time_frames % patch_frames != 0 or time_frames == 0:
        raise ValueError(
            f"mel has {time_frames} time frames, not a positive multiple of patch_frames="
            f"{patch_frames}: crop or pad the input to a multiple of {patch_frames} frames"
        )
    if mel_bins % patch_bins != 0:
        raise ValueError(
            f"mel has {mel_bins} mel bins, not a multiple of patch_bins={patch_bins}: "
            "use the front-end preset the model was built for"
        )


def patchify(spectrogram: torch.Tensor, patch_frames: int, patch_bins: int) -> torch.Tensor:
    """(batch, 1, time, mel) -> (batch, n_time * n_freq, patch_frames * patch_bins)."""
    batch, channels, time_frames, mel_bins = spectrogram.shape
    if channels != 1:
        raise ValueError(f"expected one channel, got spectrogram of shape {tuple(spectrogram.shape)}")
    check_patchable(time_frames, mel_bins, patch_frames, patch_bins)
    n_time, n_freq = time_frames // patch_frames, mel_bins // patch_bins
    x = spectrogram.reshape(batch, n_time, patch_frames, n_freq, patch_bins)
    x = x.permute(0, 1, 3, 2, 4)  # (batch, n_time, n_freq, patch_frames, patch_bins)
    return x.reshape(batch, n_time * n_freq, patch_frames * patch_bins)


def unpatchify(patches: torch.Tensor, n_time_patches: int, patch_frames: int, patch_bins: int) -> torch.Tensor:
    """(batch, n_time * n_freq, patch_frames * patch_bins) -> (batch, 1, time, mel)."""
    batch, n_patches, patch_values = patches.shape
    if patch_values != patch_frames * patch_bins or n_patches % n_time_patches != 0:
        raise ValueError(
            f"patches of shape {tuple(patches.shape)} do not match {n_time_patches} time patches "
            f"of {patch_frames} x {patch_bins}"
        )
    n_freq = n_patches // n_time_patches
    x = patches.reshape(batch, n_time_patches, n_freq, patch_frames, patch_bins)
    x = x.permute(0, 1, 3, 2, 4)  # (batch, n_time, patch_frames, n_freq, patch_bins)
    return x.reshape(batch, 1, n_time_patches * patch_frames, n_freq * patch_bins)


class PatchGrid:
    """Patch-grid arithmetic for a dataclass with `crop_frames`, `n_mels`, `patch_frames` and
    `patch_bins` fields (model configs and specs inherit it instead of repeating it)."""

    @property
    def n_time_patches(self) -> int:
        return self.crop_frames // self.patch_frames

    @property
    def n_freq_patches(self) -> int:
        return self.n_mels // self.patch_bins

    @property
    def n_patches(self) -> int:
        return self.n_time_patches * self.n_freq_patches

    @property
    def patch_values(self) -> int:
        return self.patch_frames * self.patch_bins
