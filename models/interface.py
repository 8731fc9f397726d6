"""What every model in the zoo exposes to the pipeline: its output, its spec, its parameter count."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from models.layers.patching import FRONTEND_HOP_MS, PatchGrid, patchify, unpatchify

# Conventions shared by every model in this package (stated once, here):
# - mel input is (batch, time_frames, mel_bins) float32; internally (batch, 1, time, mel).
# - patches are ordered time-major: token index = time_patch * n_freq_patches + freq_patch, so the
#   tokens of one time step are contiguous and frame features are a plain reshape.
# - mask: 1 = removed (hidden from the encoder), 0 = visible. `scored`: 1 = in the loss.


@dataclass(frozen=True, kw_only=True)
class MaskedOutput:
    """What `model(mel)` returns.

    loss: scalar mean squared error over the scored patches.
    pred: (batch, n_patches, patch_values) predictions in patch order, in the space of the loss's
        target (per-patch normalized when the model regresses normalized patches); rows that were
        not decoded (CrossMAE partial reconstruction) are zero.
    mask: (batch, n_patches) float, 1 = removed from the encoder input.
    scored: (batch, n_patches) float, 1 = patch counted in the loss; None means "equal to mask".
    """

    loss: torch.Tensor
    pred: torch.Tensor
    mask: torch.Tensor
    scored: torch.Tensor | None = None


@dataclass(frozen=True, kw_only=True)
class ModelSpec(PatchGrid):
    """The facts about a built model that the data pipeline and evaluation need."""

    name: str
    n_mels: int  # mel bins the model expects (64 for the dasheng front end, 80 for audiomae)
    crop_frames: int  # training crop length in 10 ms frames
    patch_frames: int  # time frames per patch
    patch_bins: int  # mel bins per patch
    mask_ratio: float  # fraction of patches removed from the encoder input
    frontend_preset: str  # "audiomae" | "dasheng" (pipeline/audio/frontend.py presets)
    embed_dim: int  # feature size of one frame returned by `embed`
    frame_hop_ms: float  # time between consecutive `embed` frames

    @property
    def input_shape(self) -> tuple[int, int]:
        """(time_frames, mel_bins) of one training crop."""
        return (self.crop_frames, self.n_mels)


def patch_grid_spec(config) -> ModelSpec:
    """The spec of a model over a mel patch grid (MAE, AudioMAE++, AxLSTM, SSAST): a frame is one time
    step, its patches across frequency concatenated, so embed_dim = width x frequency patches."""
    return ModelSpec(
        name=config.name,
        n_mels=config.n_mels,
        crop_frames=config.crop_frames,
        patch_frames=config.patch_frames,
        patch_bins=config.patch_bins,
        mask_ratio=config.mask_ratio,
        frontend_preset=config.frontend_preset,
        embed_dim=config.encoder_dim * config.n_freq_patches,
        frame_hop_ms=config.patch_frames * FRONTEND_HOP_MS[config.frontend_preset],
    )


class PatchedMelModel(nn.Module):
    """Behaviour shared by every family: mel <-> patches and the CrossMAE learning-rate scale.

    Subclasses set `self.config` (with `decoder`, `mask_ratio`, `effective_prediction_ratio`,
    `n_freq_patches`) and `self.spec` (a ModelSpec) in their constructor.
    """

    config: object
    spec: ModelSpec

    @property
    def lr_scale(self) -> float:
        """CrossMAE scales the learning rate by gamma / p; 1.0 for every other decoder."""
        if self.config.decoder == "cross":
            return self.config.effective_prediction_ratio / self.config.mask_ratio
        return 1.0

    def patchify(self, mel: torch.Tensor) -> torch.Tensor:
        """mel (batch, time, n_mels) -> patches (batch, n_patches, patch_values)."""
        if mel.ndim != 3 or mel.shape[-1] != self.spec.n_mels:
            raise ValueError(
                f"{self.spec.name} expects mel shaped (batch, time, {self.spec.n_mels}) from the "
                f"{self.spec.frontend_preset!r} front end, got {tuple(mel.shape)}"
            )
        return patchify(mel[:, None], self.spec.patch_frames, self.spec.patch_bins)

    def unpatchify(self, patches: torch.Tensor) -> torch.Tensor:
        """patches (batch, n_patches, patch_values) -> mel (batch, time, n_mels), e.g. to plot pred."""
        n_time = patches.shape[1] // self.config.n_freq_patches
        return unpatchify(patches, n_time, self.spec.patch_frames, self.spec.patch_bins)[:, 0]


def count_parameters(module: nn.Module) -> int:
    """Trainable parameters (requires_grad); fixed sin-cos tables are buffers and do not count."""
    return sum(p.numel() for p in module.parameters() if p.requires_grad)
