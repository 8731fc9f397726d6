"""`embed_layer` of the MAE family: which encoder layer `embed` reads out (the readout study's knob)."""

from __future__ import annotations

import pytest
import torch

from models import build_model


def _mel(model, seed: int = 0) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(2, model.spec.crop_frames, model.spec.n_mels, generator=generator)


@pytest.mark.parametrize("name", ["mae-debug", "audiomae++-debug"])
def test_the_last_layer_is_the_default_readout(name):
    torch.manual_seed(0)
    default = build_model(name).eval()
    depth = default.config.encoder_depth
    last = build_model(name, embed_layer=depth).eval()
    last.load_state_dict(default.state_dict())
    mel = _mel(default)
    with torch.no_grad():
        torch.testing.assert_close(last.embed(mel), default.embed(mel))


def test_layer_zero_is_the_patch_embedding_with_positions():
    torch.manual_seed(0)
    model = build_model("mae-debug", embed_layer=0).eval()
    mel = _mel(model)
    with torch.no_grad():
        patches = model.patchify(model.encoder.normalize_mel(mel))
        by_hand = model.encoder.pos_embed(model.encoder.patch_embed(patches))
        frames = model.embed(mel)
    assert frames.shape == (2, model.spec.crop_frames // model.config.patch_frames, model.config.encoder_dim)
    torch.testing.assert_close(frames, by_hand.reshape(frames.shape))


def test_a_middle_block_differs_from_the_last_and_is_un_normed():
    torch.manual_seed(0)
    reference = build_model("mae-debug").eval()
    first = build_model("mae-debug", embed_layer=1).eval()
    first.load_state_dict(reference.state_dict())
    mel = _mel(reference)
    with torch.no_grad():
        block_one, last = first.embed(mel), reference.embed(mel)
    assert block_one.shape == last.shape
    assert not torch.allclose(block_one, last)
    # The final LayerNorm leaves every token with mean ~0 over features; block 1's output does not.
    assert last.mean(-1).abs().max() < 1e-4 < block_one.mean(-1).abs().max()


def test_a_layer_outside_the_encoder_is_a_clear_error():
    with pytest.raises(ValueError, match=r"embed_layer=9: use None \(last\), 0 \(patch embedding\)"):
        build_model("mae-debug", embed_layer=9)
