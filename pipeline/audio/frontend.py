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

import dataclasses
import functools
import warnings
from pathlib import Path
from typing import Literal

import numpy as np
import soundfile

# torch and torchaudio are imported inside the functions that use them: readers of finished shards
# (crop workers, pandas users) need `normalize_clip` and the presets, not a 2-second torch import.

TARGET_SAMPLE_RATE_HZ = 16_000


class AudioDecodeError(ValueError):
    """An input that cannot be turned into audio; `reason` says why in words a user can act on,
    `kind` is a short category used to group rejections in the prep summary."""

    def __init__(self, path: str | Path, reason: str, kind: str = "not audio"):
        super().__init__(f"{path}: {reason}")
        self.path = str(path)
        self.reason = reason
        self.kind = kind


@dataclasses.dataclass(frozen=True, kw_only=True)
class FrontendPreset:
    """Every parameter of a log-mel front end; all of them are recorded in the shard manifest."""

    name: str
    sample_rate_hz: int
    n_mels: int
    n_fft: int
    win_ms: float
    hop_ms: float
    f_min_hz: float
    f_max_hz: float
    power: float
    log_kind: Literal["ln", "db"]  # "ln": log(x + log_eps); "db": 10 log10(max(x, log_eps)), top_db floor
    log_eps: float
    top_db: float | None  # only for "db": values below max - top_db are raised to it
    normalize_per_clip: bool  # the recipe standardises each clip at load time
    # "log_mel": the STFT -> mel -> log fields above apply. "waveform": a frame is `hop_samples`
    # consecutive samples stored as they are (n_mels = samples per frame; the spectral fields are unused).
    kind: Literal["log_mel", "waveform"] = "log_mel"

    @property
    def win_samples(self) -> int:
        return round(self.win_ms * self.sample_rate_hz / 1000)

    @property
    def hop_samples(self) -> int:
        return round(self.hop_ms * self.sample_rate_hz / 1000)

    @property
    def min_samples(self) -> int:
        """Shortest clip the preset accepts: one frame of samples for a waveform; for a log-mel, what
        the centred STFT's reflect padding needs (n_fft // 2 + 1)."""
        if self.kind == "waveform":
            return self.hop_samples
        return self.n_fft // 2 + 1

    def num_frames(self, num_samples: int) -> int:
        """Frames `compute_features` returns for a clip of `num_samples`: whole frames of samples for a
        waveform (a tail under one frame, < 20 ms, is dropped), 1 + n // hop for the centred STFT."""
        if self.kind == "waveform":
            return num_samples // self.hop_samples
        return 1 + num_samples // self.hop_samples

    def silence(self, features: np.ndarray) -> float:
        """The value that pads a clip's features: its minimum for a log-mel (its quietest level, silence
        after log compression); 0 for a waveform (the mean after per-clip normalisation is 0 too, but
        padding happens before it, where silence is a zero sample)."""
        if self.kind == "waveform":
            return 0.0
        return float(features.min())

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


PRESETS: dict[str, FrontendPreset] = {
    # AudioMAE-style fbank as the AudioMAE++ recipe uses it: 80 bins, 25 ms / 10 ms, 50-8000 Hz.
    "audiomae": FrontendPreset(
        name="audiomae",
        sample_rate_hz=TARGET_SAMPLE_RATE_HZ,
        n_mels=80,
        n_fft=400,
        win_ms=25.0,
        hop_ms=10.0,
        f_min_hz=50.0,
        f_max_hz=8000.0,
        power=2.0,
        log_kind="ln",
        log_eps=1e-6,
        top_db=None,
        normalize_per_clip=True,
    ),
    # Dasheng: 64 bins, n_fft = window = 512 (32 ms), 10 ms hop, 0-8000 Hz, dB with a 120 dB range.
    "dasheng": FrontendPreset(
        name="dasheng",
        sample_rate_hz=TARGET_SAMPLE_RATE_HZ,
        n_mels=64,
        n_fft=512,
        win_ms=32.0,
        hop_ms=10.0,
        f_min_hz=0.0,
        f_max_hz=8000.0,
        power=2.0,
        log_kind="db",
        log_eps=1e-10,
        top_db=120.0,
        normalize_per_clip=False,
    ),
    # SSAST's input (Gong et al., AAAI 2022, Sec. 3.1; its code's Kaldi fbank call): 128 mel bins,
    # 25 ms window, 10 ms hop, Hann window, 20 Hz (Kaldi's low_freq default) to 8000 Hz, natural log.
    # Kaldi rounds the FFT up to a power of two (512 for 400 samples). SSAST standardises with one
    # dataset mean/std; the per-bin dataset mean/std of the shard manifest is the same idea per bin.
    "ssast": FrontendPreset(
        name="ssast",
        sample_rate_hz=TARGET_SAMPLE_RATE_HZ,
        n_mels=128,
        n_fft=512,
        win_ms=25.0,
        hop_ms=10.0,
        f_min_hz=20.0,
        f_max_hz=8000.0,
        power=2.0,
        log_kind="ln",
        log_eps=1.1920929e-07,  # Kaldi's floor: float32 machine epsilon
        top_db=None,
        normalize_per_clip=False,
    ),
    # HuBERT / wav2vec 2.0 read 16 kHz samples (HuBERT Sec. IV-B, wav2vec 2.0 Sec. 2). A frame is 20 ms
    # (320 samples): their conv feature encoder's stride, so one stored frame is one encoder frame and
    # crops, masks and labels align. Each crop is standardised (wav2vec 2.0 / HuBERT Large `normalize`).
    # Samples are stored as float16 (2 bytes, as int16 PCM; relative precision 2^-11, i.e. the
    # quantisation noise sits ~66 dB under the signal at any level, where int16's is fixed at -96 dBFS).
    "waveform": FrontendPreset(
        name="waveform",
        sample_rate_hz=TARGET_SAMPLE_RATE_HZ,
        n_mels=320,
        n_fft=320,
        win_ms=20.0,
        hop_ms=20.0,
        f_min_hz=0.0,
        f_max_hz=8000.0,
        power=1.0,
        log_kind="ln",
        log_eps=0.0,
        top_db=None,
        normalize_per_clip=True,
        kind="waveform",
    ),
}


def get_preset(name: str) -> FrontendPreset:
    """The preset called `name` (one of PRESETS)."""
    try:
        return PRESETS[name]
    except KeyError:
        raise ValueError(f"unknown front-end preset {name!r}; choose one of {sorted(PRESETS)}") from None


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
    import torchaudio

    window = torch.hann_window(preset.win_samples)
    with warnings.catch_warnings():
        # `ssast`'s 128 filters on a 512-point FFT leave filter 3 (~60 Hz) with no FFT bin, as Kaldi's own
        # banks do (tests/pipeline/test_frontend.py): its log-mel is the floor, its dataset std 0.
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
        spectrum = torch.stft(wave, n_fft=preset.n_fft, hop_length=preset.hop_samples, win_length=preset.win_samples,
                              window=window, center=True, pad_mode="reflect", return_complex=True)  # (freqs, frames)
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
