"""Decode any source file to 16 kHz mono float32, convert files with sox, write 16-bit wavs.

sox reads every format the packages ship (wav, raw GSM, ogg, flac, aiff) and resamples fast;
files libsndfile can read go through the shared front end (`pipeline.audio.frontend`) instead, which
avoids one child process per clip.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np
import soundfile

from pipeline.audio.frontend import (
    TARGET_SAMPLE_RATE_HZ,
    AudioDecodeError,
    load_audio,
    to_mono_16k,
)

SOUNDFILE_SUFFIXES = {".wav", ".ogg", ".flac", ".aiff", ".aif"}


def decode_16k_mono(path: Path) -> np.ndarray:
    """The whole file as float32 (samples,) at 16 kHz mono."""
    path = Path(path)
    if path.suffix.lower() in SOUNDFILE_SUFFIXES:
        wave, sample_rate_hz = load_audio(path)
        return to_mono_16k(wave, sample_rate_hz)
    return _decode_with_sox(path)


def decode_or_reason(path: Path) -> tuple[np.ndarray | None, str | None]:
    """(wave, None), or (None, why) for a file that holds no usable audio (a few packaged prompts are empty)."""
    try:
        wave = decode_16k_mono(path)
    except AudioDecodeError as error:
        return None, error.reason
    return (wave, None) if len(wave) else (None, "contains no audio samples")


def _decode_with_sox(path: Path) -> np.ndarray:
    command = [
        "sox",
        "-R",
        "-V1",
        str(path),
        "-t",
        "raw",
        "-e",
        "floating-point",
        "-b",
        "32",
        "-c",
        "1",
        "-r",
        str(TARGET_SAMPLE_RATE_HZ),
        "-",
    ]
    completed = subprocess.run(command, capture_output=True, check=False)
    if completed.returncode != 0:
        raise RuntimeError(f"sox could not decode {path}: {completed.stderr.decode(errors='replace').strip()}")
    return np.frombuffer(completed.stdout, dtype="<f4").astype(np.float32)


def convert_to_16k_wav(source: Path, target: Path, *, max_duration_s: float | None = None) -> float:
    """sox `source` -> 16 kHz mono 16-bit wav at `target` (cut at `max_duration_s`); returns its duration.

    `-R` seeds sox's generators with a constant and `-D` turns dither off: the same input gives
    the same bytes on every run.
    """
    target.parent.mkdir(parents=True, exist_ok=True)
    command = [
        "sox",
        "-R",
        "-V1",
        str(source),
        "-D",
        "-b",
        "16",
        "-c",
        "1",
        "-r",
        str(TARGET_SAMPLE_RATE_HZ),
        str(target),
    ]
    if max_duration_s is not None:
        command += ["trim", "0", f"{max_duration_s:.3f}"]
    completed = subprocess.run(command, capture_output=True, check=False)
    if completed.returncode != 0:
        raise RuntimeError(f"sox could not convert {source}: {completed.stderr.decode(errors='replace').strip()}")
    return soundfile.info(str(target)).frames / TARGET_SAMPLE_RATE_HZ


def write_wav_16k(path: Path, wave: np.ndarray) -> None:
    """float32 (samples,) in [-1, 1] -> 16-bit PCM wav at 16 kHz (clipped, never wrapped)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    soundfile.write(str(path), np.clip(wave, -1.0, 1.0), TARGET_SAMPLE_RATE_HZ, subtype="PCM_16", format="WAV")
