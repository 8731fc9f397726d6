"""Audio front end: decode, 16 kHz mono, log-mel. Pure functions, no Ray.

Conventions (hold for every preset):
- Mel matrices are float32 shaped (frames, n_mels): time first, as the models take them.
- STFT frames are centred (the signal is reflect-padded by n_fft // 2 on both sides), so a clip of
  `n` samples has `1 + n // hop` frames; a 10 s clip at a 10 ms hop has 1001 frames.
- Mel filters use the HTK mel scale without area normalisation (torchaudio's defaults), a
  periodic Hann window, and power 2 (energy).
- The stored matrix is the raw log-mel; per-clip normalisation (`normalize_clip`) happens when a
  training reader loads it, so one set of shards serves models with and without it.
"""

from __future__ import annotations

import functools
import warnings
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import soundfile

from pipeline.audio.presets import PRESETS, TARGET_SAMPLE_RATE_HZ, FrontendPreset, get_preset  # noqa: F401 (re-exported)

# torch and torchaudio are imported inside the functions that use them: readers of finished shards
# (crop workers, pandas users) need `normalize_clip` and the presets, not a 2-second torch import.
if TYPE_CHECKING:
    import torch
    import torchaudio


class AudioDecodeError(ValueError):
    """An input that cannot be turned into audio; `reason` says why in words a user can act on,
    `kind` is a short category used to group rejections in the prep summary."""

    def __init__(self, path: str | Path, reason: str, kind: str = "not audio"):
        super().__init__(f"{path}: {reason}")
        self.path = str(path)
        self.reason = reason
        self.kind = kind


def load_audio(path: str | Path) -> tuple[np.ndarray, int]:
    """Decode a whole file to a float32 mono waveform (mean of channels) and its sample rate.

    Raises `AudioDecodeError` for anything that is not finite, non-empty audio. Long files are
    better read segment by segment (`pipeline.audio.segments`); this is for clips and tests.
    """
    path = Path(path)
    check_file_not_empty(path)
    try:
        wave, sample_rate_hz = soundfile.read(str(path), dtype="float32", always_2d=True)
    except (soundfile.LibsndfileError, RuntimeError, TypeError) as error:
        raise AudioDecodeError(path, f"not readable as audio ({error})") from error
    if wave.shape[0] == 0:
        raise AudioDecodeError(path, "contains no audio samples (zero-length)", kind="zero-length")
    mono = downmix_to_mono(wave)
    check_finite(path, mono)
    return mono, int(sample_rate_hz)


def check_file_not_empty(path: Path) -> None:
    if path.stat().st_size == 0:
        raise AudioDecodeError(path, "empty file (0 bytes)", kind="empty file")


def check_finite(path: str | Path, wave: np.ndarray) -> None:
    """NaN/inf samples are rejected, not repaired: they mean a broken encoder, and any repair
    (zeros, clipping) would silently put invented audio into the training data."""
    finite = np.isfinite(wave)
    if not finite.all():
        n_nan = int(np.isnan(wave).sum())
        n_inf = int((~finite).sum()) - n_nan
        raise AudioDecodeError(
            path, f"non-finite samples ({n_nan} NaN, {n_inf} inf) in float audio", kind="non-finite samples"
        )


def downmix_to_mono(wave: np.ndarray) -> np.ndarray:
    """(samples,) or (samples, channels) -> (samples,): the mean of the channels."""
    if wave.ndim == 1:
        return wave
    # Adding channel columns one by one: numpy's mean over a short inner axis is ~20x slower, and it
    # was the largest single cost of prep on stereo files.
    mono = wave[:, 0].copy()
    for channel in range(1, wave.shape[1]):
        mono += wave[:, channel]
    if wave.shape[1] > 1:
        mono *= np.float32(1.0 / wave.shape[1])
    return mono


def to_mono_16k(wave: np.ndarray, sample_rate_hz: int) -> np.ndarray:
    """Mono (mean of channels; `wave` is (samples,) or (samples, channels)) at 16 kHz, float32."""
    wave = downmix_to_mono(np.asarray(wave, dtype=np.float32))
    if sample_rate_hz == TARGET_SAMPLE_RATE_HZ:
        return np.ascontiguousarray(wave)
    import torch

    with torch.inference_mode():
        resampled = _resampler(int(sample_rate_hz))(torch.from_numpy(np.ascontiguousarray(wave)))
    return resampled.numpy()


@functools.lru_cache(maxsize=16)
def _resampler(sample_rate_hz: int) -> torchaudio.transforms.Resample:
    # Same windowed-sinc filter as torchaudio.functional.resample, but its kernel is built once per
    # source rate instead of once per segment (that rebuild was a third of the 44.1 kHz cost).
    import torchaudio

    return torchaudio.transforms.Resample(orig_freq=sample_rate_hz, new_freq=TARGET_SAMPLE_RATE_HZ)


@functools.lru_cache(maxsize=8)
def _window_and_filterbank(preset: FrontendPreset) -> tuple[torch.Tensor, torch.Tensor]:
    """Periodic Hann window (win_samples,) and HTK mel filterbank (n_fft // 2 + 1, n_mels), built once."""
    import torch

    window = torch.hann_window(preset.win_samples)
    with warnings.catch_warnings():
        # `ssast`'s 128 filters on a 512-point FFT leave filter 3 (~60 Hz) with no FFT bin, as Kaldi's own
        # banks do (tests/pipeline/audio/test_frontend.py): its log-mel is the floor, its dataset std 0.
        warnings.filterwarnings("ignore", message="At least one mel filterbank has all zero values")
        filterbank = _mel_filterbank(preset)
    return window, filterbank


def _mel_filterbank(preset: FrontendPreset) -> torch.Tensor:
    import torchaudio

    return torchaudio.functional.melscale_fbanks(
        n_freqs=preset.n_fft // 2 + 1,
        f_min=preset.f_min_hz,
        f_max=preset.f_max_hz,
        n_mels=preset.n_mels,
        sample_rate=preset.sample_rate_hz,
        norm=None,
        mel_scale="htk",
    )


def compute_features(wave_16k: np.ndarray, preset: FrontendPreset) -> np.ndarray:
    """What the shards store for a clip: float32 (frames, n_mels), frames = `preset.num_frames(n)`."""
    if preset.kind == "waveform":
        return frame_waveform(wave_16k, preset)
    return compute_log_mel(wave_16k, preset)


def frame_waveform(wave_16k: np.ndarray, preset: FrontendPreset) -> np.ndarray:
    """A 16 kHz waveform as (n // hop, hop) float32 rows of consecutive samples; the tail under one
    frame is dropped (it cannot hold an encoder frame)."""
    frames = preset.num_frames(len(wave_16k))
    if frames < 1:
        raise ValueError(
            f"clip of {len(wave_16k)} samples is shorter than one {preset.hop_samples}-sample frame "
            f"({preset.hop_ms:g} ms) of preset {preset.name!r}"
        )
    samples = np.asarray(wave_16k[: frames * preset.hop_samples], dtype=np.float32)
    return samples.reshape(frames, preset.hop_samples).copy()


def compute_log_mel(wave_16k: np.ndarray, preset: FrontendPreset) -> np.ndarray:
    """Log-mel of a 16 kHz mono float32 waveform: float32 (frames, n_mels), frames = 1 + n // hop.

    The same numbers as torchaudio's MelSpectrogram (centred reflect-padded STFT, Hann window, HTK
    filterbank), computed time-first and with power 2 as re^2 + im^2: no square root, no transpose.
    """
    if len(wave_16k) < preset.min_samples:
        raise ValueError(
            f"clip of {len(wave_16k)} samples is shorter than the {preset.min_samples} samples "
            f"({1000 * preset.min_samples / preset.sample_rate_hz:.1f} ms) preset {preset.name!r} needs"
        )
    import torch

    window, filterbank = _window_and_filterbank(preset)
    wave = torch.from_numpy(np.ascontiguousarray(wave_16k, dtype=np.float32))
    with torch.inference_mode():
        spectrum = torch.stft(
            wave,
            n_fft=preset.n_fft,
            hop_length=preset.hop_samples,
            win_length=preset.win_samples,
            window=window,
            center=True,
            pad_mode="reflect",
            return_complex=True,
        )  # (freqs, frames)
        if preset.power == 2.0:
            power = spectrum.real.square() + spectrum.imag.square()
        else:
            power = spectrum.abs().pow(preset.power)
        mel = power.T @ filterbank  # (frames, n_mels)
        if preset.log_kind == "ln":
            log_mel = torch.log(mel + preset.log_eps)
        elif preset.log_kind == "db":
            log_mel = 10.0 * torch.log10(torch.clamp(mel, min=preset.log_eps))
            if preset.top_db is not None:
                log_mel = torch.maximum(log_mel, log_mel.max() - preset.top_db)
        else:
            raise ValueError(f"preset {preset.name!r}: unknown log_kind {preset.log_kind!r}")
    return log_mel.contiguous().numpy()


def normalize_clip(mel: np.ndarray) -> np.ndarray:
    """Standardise one clip (frames, n_mels) to zero mean, unit std over all its values."""
    mel = np.asarray(mel, dtype=np.float32)
    std = float(mel.std())
    # A constant clip (digital silence) has std 0: centre it rather than divide by zero.
    return (mel - mel.mean()) / (std if std > 1e-5 else 1.0)
