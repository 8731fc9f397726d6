"""Real speech for the model tests: espeak-ng renders sentences, the project's front end turns
them into log-mel spectrograms."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from pipeline.audio.frontend import (
    compute_features,
    get_preset,
    load_audio,
    normalize_clip,
    to_mono_16k,
)

SENTENCES = [
    "The quick brown fox jumps over the lazy dog while the band plays on.",
    "Seven silver swans swam silently seaward under a pale morning sky.",
    "Audio models learn structure by filling in the parts of a spectrogram they cannot see.",
]


@pytest.fixture(scope="session")
def speech_log_mel(tmp_path_factory: pytest.TempPathFactory) -> dict[str, np.ndarray]:
    """preset name -> clip-normalized features (frames, n_mels) of ~15 s of synthetic speech: log-mel, or
    for `waveform` 20 ms frames of samples (frames, 320)."""
    if shutil.which("espeak-ng") is None:
        pytest.fail("espeak-ng is missing: install the Debian packages in scripts/debian-packages.txt")
    out_dir = tmp_path_factory.mktemp("speech")
    waves = []
    for index, sentence in enumerate(SENTENCES):
        path = Path(out_dir) / f"sentence{index}.wav"
        subprocess.run(["espeak-ng", "-s", "150", "-w", str(path), sentence], check=True)
        wave, sample_rate_hz = load_audio(path)
        waves.append(to_mono_16k(wave, sample_rate_hz))
    speech = np.concatenate(waves)
    return {
        name: normalize_clip(compute_features(speech, get_preset(name)))
        for name in ("audiomae", "dasheng", "ssast", "waveform")
    }


@pytest.fixture(autouse=True)
def _one_torch_thread():
    """Debug-size matmuls gain nothing from a second thread, and on a busy machine OpenMP's
    spinning threads made each training step 20x slower; restore the setting afterwards."""
    import torch

    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)
