"""Bring clips to a task's fixed duration and a common loudness.

Every clip of a task has exactly `sample_duration` seconds (as HEAR's evaluator would pad or cut
them anyway) and the same RMS level, so neither length nor loudness gives the label away.
"""

from __future__ import annotations

import numpy as np

from pipeline.audio.frontend import TARGET_SAMPLE_RATE_HZ

TARGET_RMS_DBFS = -20.0
PEAK_LIMIT = 0.98


def seconds_to_samples(seconds: float) -> int:
    return round(seconds * TARGET_SAMPLE_RATE_HZ)


def fit_to_duration(wave: np.ndarray, n_samples: int, *, offset: int = 0) -> np.ndarray:
    """Samples [offset, offset + n_samples) of `wave`, zero-padded at the end when it is shorter."""
    piece = wave[offset : offset + n_samples]
    return np.pad(piece, (0, n_samples - len(piece))).astype(np.float32)


def normalize_loudness(wave: np.ndarray, *, target_rms_dbfs: float = TARGET_RMS_DBFS) -> np.ndarray:
    """Scale to `target_rms_dbfs` RMS (measured where the clip is not silent), peaks kept under 0.98."""
    active = wave[np.abs(wave) > 1e-4]
    rms = float(np.sqrt(np.mean(np.square(active, dtype=np.float64)))) if len(active) else 0.0
    if rms == 0.0:
        return wave.astype(np.float32)
    scaled = wave * (10 ** (target_rms_dbfs / 20) / rms)
    peak = float(np.abs(scaled).max())
    if peak > PEAK_LIMIT:
        scaled = scaled * (PEAK_LIMIT / peak)
    return scaled.astype(np.float32)


def shape_clip(wave: np.ndarray, duration_s: float, *, offset: int = 0) -> np.ndarray:
    return normalize_loudness(fit_to_duration(wave, seconds_to_samples(duration_s), offset=offset))


def trim_leading_silence(wave: np.ndarray, *, threshold: float = 1e-3) -> np.ndarray:
    """Drop the silence before the first sample louder than `threshold` (synthesizers lead with some)."""
    loud = np.flatnonzero(np.abs(wave) > threshold)
    return wave[loud[0] :] if len(loud) else wave
