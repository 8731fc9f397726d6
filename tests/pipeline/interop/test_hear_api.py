"""The HEAR API on a saved debug checkpoint, with the public validator's checks."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import models
import pipeline.interop.hear_api as hear
from pipeline.checkpoint import save_model_checkpoint

SAMPLE_RATE_HZ = 16_000


@pytest.fixture(scope="module")
def hear_model(tmp_path_factory):
    torch.manual_seed(0)
    model = models.build_model("audiomae++-debug")
    directory = save_model_checkpoint(
        tmp_path_factory.mktemp("ckpt"),
        model,
        model_name="audiomae++-debug",
        overrides={},
        step=7,
        shard_fingerprint="test",
    )
    return hear.load_model(str(directory))


def _white_noise(n_sounds: int, seconds: float, seed: int = 0) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    return torch.rand(n_sounds, int(seconds * SAMPLE_RATE_HZ), generator=generator) * 2.0 - 1.0


def test_model_has_the_required_integer_attributes(hear_model):
    assert isinstance(hear_model, torch.nn.Module)
    for name in ("sample_rate", "scene_embedding_size", "timestamp_embedding_size"):
        assert isinstance(getattr(hear_model, name), int)
    assert hear_model.sample_rate == 16_000
    assert hear_model.scene_embedding_size == models.build_model("audiomae++-debug").spec.embed_dim


def test_loaded_checkpoint_has_the_saved_weights(tmp_path):
    torch.manual_seed(3)
    model = models.build_model("mae-debug")
    save_model_checkpoint(tmp_path, model, model_name="mae-debug", overrides={}, step=1, shard_fingerprint="x")
    loaded = hear.load_model(str(tmp_path))
    for name, tensor in model.state_dict().items():
        torch.testing.assert_close(loaded.model.state_dict()[name], tensor)


@pytest.mark.parametrize("seconds", [1.07, 1.98, 4.0])
def test_timestamp_embeddings_pass_validator_checks(hear_model, seconds):
    audio = _white_noise(2, seconds)
    embeddings, timestamps = hear.get_timestamp_embeddings(audio, hear_model)
    assert embeddings.dtype == torch.float32 and timestamps.dtype == torch.float32
    assert embeddings.ndim == 3 and embeddings.shape[0] == 2
    assert embeddings.shape[2] == hear_model.timestamp_embedding_size
    assert timestamps.shape == embeddings.shape[:2]
    # Validator: timestamps strictly increasing with one constant spacing, covering the clip.
    steps = torch.diff(timestamps, dim=1)
    assert torch.allclose(steps, steps[0, 0].expand_as(steps))
    assert steps[0, 0] > 0
    assert timestamps[0, 0] >= 0 and timestamps[0, -1] <= seconds * 1000
    assert abs(timestamps[0, -1].item() - seconds * 1000) <= steps[0, 0].item() * 1.5
    torch.testing.assert_close(timestamps[0], timestamps[1])
    assert torch.isfinite(embeddings).all()


def test_scene_embeddings_pass_validator_checks(hear_model):
    audio = _white_noise(3, 2.74, seed=1)
    scene = hear.get_scene_embeddings(audio, hear_model)
    assert scene.dtype == torch.float32
    assert scene.shape == (3, hear_model.scene_embedding_size)
    assert torch.isfinite(scene).all()
    # Different noise clips give different embeddings; the same clip twice gives the same one.
    assert not torch.allclose(scene[0], scene[1])
    again = hear.get_scene_embeddings(audio[:1], hear_model)
    torch.testing.assert_close(again[0], scene[0])


def test_scene_embedding_is_mean_of_timestamp_embeddings(hear_model):
    audio = _white_noise(2, 4.0, seed=2)
    frames, _ = hear.get_timestamp_embeddings(audio, hear_model)
    torch.testing.assert_close(hear.get_scene_embeddings(audio, hear_model), frames.mean(dim=1))


def test_bad_audio_gets_a_clear_error(hear_model):
    with pytest.raises(ValueError, match="2-D torch tensor"):
        hear.get_scene_embeddings(torch.zeros(16_000), hear_model)


def test_timestamps_lie_inside_the_audio_at_every_length_from_1_to_4_seconds(hear_model):
    """HEAR's validator refuses a timestamp past the end of the audio; 1.00-4.00 s in 10 ms steps.

    The rule that decides how many frames a clip gives is FrameEmbedder.model_input's, so the
    sweep reads the frame count from it and runs the model itself on a few lengths.
    """
    embedder = hear_model.embedder
    patch = embedder.spec.patch_frames
    late = []
    for hundredths in range(100, 401):
        samples = hundredths * SAMPLE_RATE_HZ // 100
        n_frames = len(embedder.model_input(np.zeros(samples, np.float32))) // patch
        if embedder.frame_centres_ms(n_frames)[-1] > samples * 1000 / SAMPLE_RATE_HZ:
            late.append(hundredths / 100)
    assert late == []
    for seconds in (1.01, 1.05, 2.33):  # each gave a timestamp 5 ms past the end before
        _, timestamps = hear.get_timestamp_embeddings(_white_noise(1, seconds), hear_model)
        assert timestamps[0, -1].item() <= seconds * 1000
        assert seconds * 1000 - timestamps[0, -1].item() < 4 * 10.0  # and no more than a patch is lost


class _SawInput(Exception):
    pass


class _InputRecorder(torch.nn.Module):
    """mae-debug whose embed records the device its input arrived on, then stops."""

    def __init__(self) -> None:
        super().__init__()
        self.inner = models.build_model("mae-debug")
        self.spec = self.inner.spec
        self.seen: list[torch.device] = []

    def embed(self, mel: torch.Tensor) -> torch.Tensor:
        self.seen.append(mel.device)
        raise _SawInput


def test_inputs_follow_the_model_when_it_moves_after_loading():
    """HEAR's harness calls model.to(device) on what load_model returns; the audio must follow.

    CI has no GPU, so the model moves to PyTorch's 'meta' device after it is wrapped, and its
    embed records where the embedder sent the mel.
    """
    assert hear.load_model().embedder.device == torch.device("cpu")
    recorder = _InputRecorder()
    model = hear.HearModel(recorder, {"mel_mean": [0.0] * 64, "mel_std": [1.0] * 64})
    model.to("meta")
    assert model.embedder.device == torch.device("meta")
    with pytest.raises(_SawInput):
        hear.get_scene_embeddings(_white_noise(1, 1.0), model)
    assert recorder.seen == [torch.device("meta")]
