"""The X-ARES encoder's contract, checked as X-ARES's own checker and loader check it (no downloads)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import torch

import models
from pipeline.checkpoint import save_model_checkpoint
from pipeline.interop import hear_api, xares_encoder
from pipeline.interop.xares_encoder import CHECKPOINT_ENV, AudioscaleEncoder


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory) -> Path:
    torch.manual_seed(0)
    model = models.build_model("mae-debug")
    return save_model_checkpoint(
        tmp_path_factory.mktemp("ckpt"),
        model,
        model_name="mae-debug",
        overrides={},
        step=3,
        shard_fingerprint="test",
        extra={"mel_mean": [0.0] * 64, "mel_std": [1.0] * 64},
    )


def test_the_file_has_exactly_one_class_x_ares_would_load():
    """X-ARES's loader takes the one module attribute whose name ends in "Encoder" and calls it."""
    path = Path(xares_encoder.__file__)
    spec = importlib.util.spec_from_file_location("encoder_file", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert [name for name in dir(module) if name.endswith("Encoder")] == ["AudioscaleEncoder"]


def test_the_encoder_meets_x_ares_check_audio_encoder(checkpoint, monkeypatch):
    monkeypatch.setenv(CHECKPOINT_ENV, str(checkpoint))
    encoder = AudioscaleEncoder()  # as X-ARES builds it: no arguments
    assert type(encoder).__name__.endswith("Encoder") and isinstance(encoder, torch.nn.Module)
    assert encoder.sampling_rate == 16_000
    assert encoder.output_dim == 64  # mae-debug's width
    assert encoder.hop_size_in_ms == 40.0  # 4 mel frames of 10 ms per patch column
    audio = torch.randn(2, 50_000)  # the checker's input: 3.125 s
    encoded = encoder(audio)
    # 313 mel frames = 78 whole patches + 1 frame: 78 frames of 40 ms, as X-ARES's own example says
    assert encoded.shape == (2, 78, 64) and encoded.dtype == torch.float32
    assert torch.isfinite(encoded).all()
    assert encoder(audio[0]).shape == (1, 78, 64)
    torch.testing.assert_close(encoded, hear_api.get_timestamp_embeddings(audio, encoder.hear)[0])


def test_the_weights_are_the_checkpoints(checkpoint):
    encoder = AudioscaleEncoder(checkpoint)
    torch.manual_seed(0)
    saved = models.build_model("mae-debug")
    for name, tensor in saved.state_dict().items():
        torch.testing.assert_close(encoder.hear.model.state_dict()[name], tensor)


def test_no_checkpoint_gives_a_line_naming_the_variable(monkeypatch):
    monkeypatch.delenv(CHECKPOINT_ENV, raising=False)
    with pytest.raises(ValueError, match=CHECKPOINT_ENV):
        AudioscaleEncoder()
