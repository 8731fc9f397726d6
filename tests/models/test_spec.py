"""The facts the pipeline reads from `model.spec`, against models.md and the front-end presets."""

from __future__ import annotations

import pytest
import torch

import models
from models.layers.masking import count_kept
from pipeline.audio.frontend import get_preset


def _meta(name: str) -> torch.nn.Module:
    with torch.device("meta"):
        return models.build_model(name)


def test_study_mae_spec() -> None:
    model = _meta("mae-en768-12")
    spec = model.spec
    assert spec.input_shape == (1000, 64) and spec.frontend_preset == "dasheng"
    assert (spec.patch_frames, spec.patch_bins, spec.n_patches) == (4, 64, 250)
    assert spec.mask_ratio == 0.75 and count_kept(spec.n_patches, spec.mask_ratio) == 62
    assert (spec.embed_dim, spec.frame_hop_ms) == (768, 40.0)  # 25 Hz frame embeddings
    assert model.encoder.blocks[0].attn.n_heads == 12  # heads = width / 64
    assert _meta("mae-en128-12").encoder.blocks[0].attn.n_heads == 2
    decoder = model.decoder
    assert (len(decoder.blocks), decoder.blocks[0].attn.n_heads, decoder.head.in_features) == (8, 16, 512)


def test_audiomae_plus_spec() -> None:
    model = _meta("audiomae++-base")
    spec = model.spec
    assert spec.input_shape == (200, 80) and spec.frontend_preset == "audiomae"
    assert (spec.patch_frames, spec.patch_bins, spec.n_patches) == (4, 16, 250)
    assert count_kept(spec.n_patches, spec.mask_ratio) == 50  # mask 0.8
    assert spec.embed_dim == 3840  # 5 frequency patches x 768 per frame
    assert (len(model.decoder.blocks), model.decoder.head.in_features) == (4, 384)
    assert _meta("audiomae++-large").decoder.head.in_features == 512


@pytest.mark.parametrize("name", ["mae-debug", "audiomae++-debug", "mae-en256-1", "audiomae++-tiny"])
def test_spec_agrees_with_the_front_end_preset(name: str) -> None:
    spec = _meta(name).spec
    preset = get_preset(spec.frontend_preset)
    assert spec.n_mels == preset.n_mels
    assert spec.frame_hop_ms == spec.patch_frames * preset.hop_ms
