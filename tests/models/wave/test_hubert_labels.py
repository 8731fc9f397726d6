"""HuBERT's frame labels: 39-d MFCC at 100 Hz, aligned with the 20 ms encoder frames, and the
nearest centroid; on the fly in the model they equal the target stage's offline labels."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from sklearn.cluster import KMeans

import models
from models.wave.hubert_codebook import read_codebook
from models.wave.hubert_labels import MfccFrameLabeller, crop_mfcc_features, mfcc_features
from pipeline.shards.crops import read_crops
from pipeline.targets import ensure_codebook
from pipeline.targets.features import crop_features
from tests.support.speech_waveform_shards import (
    speech_waveform,
    write_speech_waveform_shards,
)


@pytest.fixture(scope="module")
def speech(tmp_path_factory) -> np.ndarray:
    return speech_waveform(tmp_path_factory.mktemp("speech"))


@pytest.fixture(scope="module")
def speech_crops(speech) -> torch.Tensor:
    """Four 2 s crops (100 frames of 320 samples) of real speech, standardised as the reader does."""
    starts = [0, 40_000, 90_000, 150_000]
    crops = np.stack([speech[start : start + 32_000] for start in starts])
    crops = (crops - crops.mean(axis=1, keepdims=True)) / crops.std(axis=1, keepdims=True)
    return torch.from_numpy(crops.reshape(4, 100, 320).astype(np.float32))


def test_mfcc_is_39_values_at_100_hz(speech):
    one_second = torch.from_numpy(speech[:16_000])
    assert mfcc_features(one_second).shape == (1 + (16_000 - 400) // 160, 39)  # 98 frames


def test_a_crop_of_t_frames_gives_2t_minus_1_mfcc_frames(speech_crops):
    assert crop_mfcc_features(speech_crops[0]).shape == (199, 39)


@pytest.mark.parametrize("frame", [0, 37, 99])  # 99: the last frame's window reaches into the 80-sample padding
def test_label_t_is_the_mfcc_of_the_samples_encoder_frame_t_sees(speech_crops, frame):
    wave = torch.nn.functional.pad(speech_crops[0].reshape(-1), (0, 80))
    window = wave[320 * frame : 320 * frame + 400]  # the conv encoder's receptive field of frame t
    cepstra = crop_mfcc_features(speech_crops[0])[2 * frame, :13]
    torch.testing.assert_close(cepstra, mfcc_features(window)[0, :13], rtol=1e-4, atol=1e-4)


def test_labeller_agrees_with_scikit_learn_predict(speech_crops):
    features = torch.cat([crop_mfcc_features(crop) for crop in speech_crops]).numpy()
    kmeans = KMeans(n_clusters=12, n_init=1, random_state=0).fit(features)
    labels = MfccFrameLabeller(torch.from_numpy(kmeans.cluster_centers_.astype(np.float32)))(speech_crops)
    expected = np.stack([kmeans.predict(crop_mfcc_features(crop)[::2].numpy()) for crop in speech_crops])
    assert labels.shape == (4, 100)
    np.testing.assert_array_equal(labels.numpy(), expected)
    assert len(np.unique(expected)) > 6, "speech should visit most clusters"


def test_labels_on_the_fly_equal_the_stage_features_on_the_same_crops(tmp_path):
    shards = write_speech_waveform_shards(tmp_path)
    directory = ensure_codebook(shards, clusters=16, crop_frames=100, sample_fraction=1.0, log=lambda line: None)
    crops = read_crops(shards, crop_frames=100, seed=3, limit=6)  # what the training reader yields
    model = models.build_model("hubert-debug", codebook=str(directory))
    on_the_fly = model.label_frames(torch.from_numpy(crops)).numpy()
    offline = crop_features(crops, "mfcc").reshape(6, 199, 39)[:, ::2]  # the stage's features, 50 Hz
    centroids = read_codebook(directory).centroids.astype(np.float64)
    expected = ((offline[..., None, :] - centroids) ** 2).sum(axis=-1).argmin(axis=-1)
    np.testing.assert_array_equal(on_the_fly, expected)
    assert model.labeller.centroids.shape == (16, 39) and "labeller.centroids" in model.state_dict()
