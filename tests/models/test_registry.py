from __future__ import annotations

import numpy as np
import pytest
import torch

import models
from models.registry import FAMILY_MODULES
from pipeline.targets.codebook import write_codebook

# HuBERT predicts k-means labels: it trains only with a codebook (any one will do for these checks).
CODEBOOK_MODELS = {"hubert-debug"}


def _debug_names() -> list[str]:
    """`<family>-debug`, or `<family>-debug-<variant>` where a family has several (ssast: patch, frame)."""
    return [name for name in models.list_models() if name.endswith("-debug") or "-debug-" in name]


def test_every_family_has_a_debug_size() -> None:
    families = {name.split("-debug")[0] for name in _debug_names()}
    assert {"mae", "audiomae++", "ssast"} <= families
    assert len(_debug_names()) >= len(FAMILY_MODULES)


def _forward_backward(model: torch.nn.Module) -> None:
    torch.manual_seed(0)
    mel = torch.randn(2, model.spec.crop_frames, model.spec.n_mels)
    out = model(mel)
    assert out.loss.ndim == 0 and torch.isfinite(out.loss)
    assert out.pred.shape[:2] == out.mask.shape == (2, model.spec.n_patches)
    out.loss.backward()
    missing = [n for n, p in model.named_parameters() if p.requires_grad and p.grad is None]
    # the authors' transformer++ block creates one LayerNorm it never uses (models/layers/blocks.py)
    assert all(".norm3." in n for n in missing)


@pytest.fixture(scope="module")
def random_codebook(tmp_path_factory: pytest.TempPathFactory) -> str:
    directory = tmp_path_factory.mktemp("codebook") / "random-mfcc-k8"
    centroids = np.random.default_rng(0).standard_normal((8, 39)).astype(np.float32)
    write_codebook(directory, centroids, {"clusters": 8, "feature_dim": 39, "features": {"kind": "mfcc"}})
    return str(directory)


@pytest.mark.parametrize("name", _debug_names())
def test_every_registered_debug_model_does_forward_backward_on_cpu(name: str, random_codebook: str) -> None:
    overrides = {"codebook": random_codebook} if name in CODEBOOK_MODELS else {}
    _forward_backward(models.build_model(name, **overrides))


@pytest.mark.parametrize("name", ["mae-debug", "audiomae++-debug"])
def test_cross_decoder_forward_backward_on_cpu(name: str) -> None:
    _forward_backward(models.build_model(name, decoder="cross", prediction_ratio=0.25))


@pytest.mark.parametrize("name", _debug_names())
def test_embed_returns_frames_without_masking(name: str) -> None:
    model = models.build_model(name).eval()
    mel = torch.randn(2, model.spec.crop_frames, model.spec.n_mels)
    with torch.no_grad():
        frames = model.embed(mel)
        again = model.embed(mel)
    n_frames = model.spec.crop_frames // model.spec.patch_frames
    assert frames.shape == (2, n_frames, model.spec.embed_dim)
    assert torch.equal(frames, again)  # no random masking inside


def test_embed_splits_long_input_into_crops() -> None:
    model = models.build_model("audiomae++-debug").eval()
    crop = torch.randn(1, 200, 80)
    with torch.no_grad():
        long_frames = model.embed(torch.cat([crop, crop[:, :100]], dim=1))
        crop_frames = model.embed(crop)
    assert long_frames.shape == (1, 75, model.spec.embed_dim)
    assert torch.allclose(long_frames[:, :50], crop_frames, atol=1e-6)


def test_wrong_mel_bins_names_the_front_end() -> None:
    model = models.build_model("mae-debug")
    with pytest.raises(ValueError, match="dasheng"):
        model(torch.randn(1, 200, 80))


def test_unknown_override_is_named() -> None:
    with pytest.raises(ValueError, match="decoder_widht"):
        models.build_model("mae-debug", decoder_widht=3)


def test_unknown_model_lists_the_registered_ones() -> None:
    with pytest.raises(KeyError, match="mae-debug"):
        models.build_model("mae-en999-1")


def test_cross_decoder_pairs_with_any_encoder_and_scales_lr() -> None:
    model = models.build_model("audiomae++-debug", decoder="cross", prediction_ratio=0.25)
    assert model.lr_scale == pytest.approx(0.25 / 0.8)
    assert models.build_model("audiomae++-debug").lr_scale == 1.0


def test_prediction_ratio_above_mask_ratio_is_rejected() -> None:
    with pytest.raises(ValueError, match="prediction_ratio=0.9"):
        models.build_model("mae-debug", decoder="cross", prediction_ratio=0.9)


def test_input_longer_than_the_position_table_is_rejected_in_forward() -> None:
    model = models.build_model("mae-debug")
    with pytest.raises(ValueError, match="model.embed"):
        model(torch.randn(1, 400, 64))


def test_unpatchify_restores_the_mel_layout() -> None:
    model = models.build_model("audiomae++-debug")
    mel = torch.randn(2, 200, 80)
    assert torch.equal(model.unpatchify(model.patchify(mel)), mel)


def test_own_swiglu_norm_uses_every_parameter() -> None:
    # for DDP without find_unused_parameters: the authors' block leaves its third LayerNorm unused
    model = models.build_model("audiomae++-debug", swiglu_norm="own")
    model(torch.randn(2, 200, 80)).loss.backward()
    assert all(p.grad is not None for p in model.parameters())
