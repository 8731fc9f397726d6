from __future__ import annotations

import pytest
import torch

from models.layers.patching import patchify, unpatchify


@pytest.mark.parametrize("patch_frames,patch_bins,mel_bins", [(4, 64, 64), (4, 16, 80), (2, 8, 16)])
def test_unpatchify_inverts_patchify(patch_frames: int, patch_bins: int, mel_bins: int) -> None:
    spectrogram = torch.randn(3, 1, 40, mel_bins)
    patches = patchify(spectrogram, patch_frames, patch_bins)
    assert patches.shape == (3, (40 // patch_frames) * (mel_bins // patch_bins), patch_frames * patch_bins)
    restored = unpatchify(patches, 40 // patch_frames, patch_frames, patch_bins)
    assert torch.equal(restored, spectrogram)


def test_patches_are_time_major_with_time_major_content() -> None:
    # value = 1000 * frame + bin identifies every cell
    frames, bins = torch.meshgrid(torch.arange(8), torch.arange(32), indexing="ij")
    spectrogram = (1000 * frames + bins).float()[None, None]
    patches = patchify(spectrogram, 4, 16)  # 2 time x 2 freq patches
    # token 1 = time patch 0, freq patch 1: frames 0-3, bins 16-31; first row then second row
    assert patches[0, 1, :16].tolist() == list(range(16, 32))
    assert patches[0, 1, 16:32].tolist() == [1000.0 + b for b in range(16, 32)]
    # token 2 = time patch 1, freq patch 0: starts at frame 4, bin 0
    assert patches[0, 2, 0].item() == 4000.0


def test_patchify_rejects_time_not_multiple_of_patch() -> None:
    with pytest.raises(ValueError, match="multiple of patch_frames=4"):
        patchify(torch.zeros(1, 1, 10, 64), 4, 64)
