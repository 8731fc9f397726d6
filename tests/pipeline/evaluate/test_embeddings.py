"""Frame, timestamp and scene embeddings: chunking, timestamps, normalisation."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

import models
from pipeline.audio.frontend import get_preset
from pipeline.evaluate.embeddings import (
    FrameEmbedder,
    MelNormalisation,
    normalisation_for,
)


@pytest.fixture(scope="module")
def embedder():
    torch.manual_seed(0)
    return FrameEmbedder(models.build_model("audiomae++-debug"), batch_chunks=3, clips_per_group=2)


def test_frame_count_and_centres_follow_the_patch_hop(embedder):
    spec = embedder.spec  # 10 ms mel hop, 4-frame patches -> one frame per 40 ms
    wave = np.random.default_rng(0).uniform(-1, 1, 16_000 * 5).astype(np.float32)
    frames = next(iter(embedder.iter_frame_features([wave])))
    mel_frames = 1 + len(wave) // 160  # 501: 125 whole patches and 1 frame, which is dropped
    assert frames.shape == (mel_frames // spec.patch_frames, spec.embed_dim)
    np.testing.assert_allclose(embedder.frame_centres_ms(3), [15.0, 55.0, 95.0])


def test_long_clip_is_encoded_crop_by_crop(embedder):
    # A clip of exactly two crops equals the two crops encoded separately.
    crop_samples = (embedder.spec.crop_frames) * 160
    wave = np.random.default_rng(1).uniform(-1, 1, 2 * crop_samples).astype(np.float32)
    mel = embedder.model_input(wave)
    crop = embedder.spec.crop_frames
    with torch.inference_mode():
        first = embedder.model.embed(torch.from_numpy(mel[None, :crop]))[0].numpy()
    frames = next(iter(embedder.iter_frame_features([wave])))
    np.testing.assert_allclose(frames[: first.shape[0]], first, rtol=1e-5, atol=1e-5)


def test_grouping_and_batching_do_not_change_results(embedder):
    rng = np.random.default_rng(2)
    waves = [rng.uniform(-1, 1, n).astype(np.float32) for n in (8000, 40_000, 16_000, 70_000, 3000)]
    batched = embedder.scene_embeddings(waves)
    one_by_one = np.stack([embedder.scene_embeddings([wave])[0] for wave in waves])
    np.testing.assert_allclose(batched, one_by_one, rtol=1e-4, atol=1e-5)


def test_tiny_clip_shorter_than_a_window_still_embeds(embedder):
    assert embedder.scene_embeddings([np.zeros(100, np.float32)]).shape == (1, embedder.embedding_size)


def test_dataset_normalisation_comes_from_the_shards_manifest(tmp_path):
    preset = get_preset("dasheng")
    (tmp_path / "manifest.json").write_text(json.dumps({"mean": [1.0] * preset.n_mels, "std": [2.0] * preset.n_mels}))
    normalisation = normalisation_for(preset, {"pretrain_config": {"shards_dir": str(tmp_path)}})
    np.testing.assert_allclose(normalisation.apply(np.full((3, preset.n_mels), 5.0, np.float32)), 2.0)
    with pytest.warns(UserWarning, match="standardising each clip"):
        assert normalisation_for(preset, {}).per_clip
    assert normalisation_for(get_preset("audiomae")) == MelNormalisation(per_clip=True)


def test_a_bin_constant_over_the_dataset_is_zero_as_in_training():
    """`ssast`'s filter 3 is empty: its log-mel is the floor everywhere and its dataset std 0. Training
    reads it as exactly its mean (0 after normalising); evaluation must too, not (x - mean) / 1e-5."""
    from pipeline.audio.frontend import compute_log_mel, get_preset
    from pipeline.evaluate.embeddings import MelNormalisation

    preset = get_preset("ssast")
    mel = compute_log_mel(np.sin(np.linspace(0, 2000, 32_000)).astype(np.float32), preset)
    stored = mel.astype(np.float16).astype(np.float64)  # what prep keeps; the manifest's stats come from it
    normalisation = MelNormalisation(
        per_clip=False, bin_mean=stored.mean(0).astype(np.float32), bin_std=stored.std(0).astype(np.float32)
    )
    normalised = normalisation.apply(mel)
    assert normalisation.bin_std[3] == 0 and np.all(normalised[:, 3] == 0)
    assert np.isfinite(normalised).all() and np.abs(normalised).max() < 50


def test_a_waveform_model_has_one_frame_per_20_ms_centred_on_its_receptive_field():
    torch.manual_seed(0)
    wave_embedder = FrameEmbedder(models.build_model("wav2vec2-debug"), batch_chunks=3, clips_per_group=2)
    wave = np.random.default_rng(0).uniform(-1, 1, 16_000 * 3 + 100).astype(np.float32)  # 150 frames + 100 samples
    frames = next(iter(wave_embedder.iter_frame_features([wave])))
    assert frames.shape == (150, wave_embedder.spec.embed_dim)  # crops of 100 frames: 100 + 50
    # frame t sees samples [320 t, 320 t + 400): centred at 20 t + 12.5 ms
    np.testing.assert_allclose(wave_embedder.frame_centres_ms(3), [12.5, 32.5, 52.5])
