"""Front-end presets: every parameter of how audio becomes what the shards store, by name.

A preset is recorded whole in each shard manifest; `pipeline.audio.frontend` computes with it.
"""

from __future__ import annotations

import dataclasses
from typing import Literal

import numpy as np

TARGET_SAMPLE_RATE_HZ = 16_000


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
    # crops, masks and labels align. Each segment is standardised when read (zero mean, unit variance,
    # before cropping): fairseq's `normalize` of its Large recipes; its Base recipes feed raw samples.
    # Samples are stored as float16 (2 bytes, as int16 PCM; relative precision 2^-11, i.e. the
    # quantisation noise sits ~66 dB under the signal at any level above 2^-14 (-84 dBFS, below which
    # float16 is subnormal and its step a fixed 2^-24, -144 dBFS), where int16's is fixed at -96 dBFS).
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
