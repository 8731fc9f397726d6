"""The rehearsal's audio, made on the spot so it needs no corpus build: tones, chirps and noise
bursts as WAV files for prep, and one small labeled task (which of three pitch bands a tone is in)
in HEAR's task format for evaluation. Seeded: the same files every time.

The rehearsal checks storage and orchestration, not learning, so the audio only has to be real
audio that exercises every reader and writer (16 kHz WAV, segments, HEAR folders).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import soundfile

from pipeline.corpus.tasks.hear_writer import LabeledClip, TaskBuild, TaskSpec, write_hear_task

SAMPLE_RATE_HZ = 16_000
TASK_NAME = "pitch_band"
_BANDS = {"low": (150.0, 300.0), "mid": (600.0, 1200.0), "high": (2400.0, 4800.0)}
_CLIPS_PER_LABEL = {"train": 6, "valid": 2, "test": 3}


def _sound(rng: np.random.Generator, seconds: float, low_hz: float, high_hz: float) -> np.ndarray:
    """A chirp between two frequencies with a noise burst and a little background noise."""
    t = np.arange(int(seconds * SAMPLE_RATE_HZ)) / SAMPLE_RATE_HZ
    start, end = rng.uniform(low_hz, high_hz, size=2)
    phase = 2 * np.pi * (start * t + (end - start) * t**2 / (2 * seconds))
    wave = 0.3 * np.sin(phase) + 0.01 * rng.standard_normal(len(t))
    burst = slice(int(rng.uniform(0, 0.8) * len(t)), None)
    wave[burst][: SAMPLE_RATE_HZ // 10] += 0.2 * rng.standard_normal(min(SAMPLE_RATE_HZ // 10, len(wave[burst])))
    return wave.astype(np.float32)


def write_pretraining_audio(folder: Path, *, files: int = 24, seconds: float = 6.0, seed: int = 0) -> Path:
    """`files` WAV files of `seconds` each (2.4 minutes by default) in `folder`; returns it."""
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    for index in range(files):
        low, high = list(_BANDS.values())[index % len(_BANDS)]
        soundfile.write(folder / f"sound_{index:03d}.wav", _sound(rng, seconds, low, high), SAMPLE_RATE_HZ)
    return folder


def write_pitch_task(tasks_dir: Path, *, seed: int = 1) -> Path:
    """The one-second pitch-band task (3 classes; 18 / 6 / 9 clips) under `tasks_dir`; returns tasks_dir."""
    rng = np.random.default_rng(seed)
    clips = [
        LabeledClip(split=split, label=label, wave=_sound(rng, 1.0, *band), source={"seed": seed})
        for split, count in _CLIPS_PER_LABEL.items()
        for label, band in _BANDS.items()
        for _ in range(count)
    ]
    spec = TaskSpec(
        name=TASK_NAME,
        description="which of three pitch bands a chirp is in (the cluster rehearsal's task)",
        labels=tuple(_BANDS),
        sample_duration_s=1.0,
        held_out="nothing (synthetic)",
    )
    write_hear_task(tasks_dir, TaskBuild(spec=spec, clips=clips), mode="rehearsal")
    return tasks_dir
