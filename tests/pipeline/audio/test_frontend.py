"""Front end against independent numpy computations: mel bins, frame counts, shapes, resampling."""

from __future__ import annotations

import numpy as np
import pytest
import soundfile

from pipeline.audio.frontend import (
    AudioDecodeError,
    compute_log_mel,
    get_preset,
    load_audio,
    normalize_clip,
    to_mono_16k,
)

SR = 16_000


def sine(freq_hz: float, seconds: float, sample_rate_hz: int = SR, amplitude: float = 0.5) -> np.ndarray:
    t = np.arange(int(seconds * sample_rate_hz)) / sample_rate_hz
    return (amplitude * np.sin(2 * np.pi * freq_hz * t)).astype(np.float32)


def htk_mel_centres_hz(n_mels: int, f_min: float, f_max: float) -> np.ndarray:
    """Centre frequencies of HTK-scale triangular filters, written from the formula."""

    def hz_to_mel(f):
        return 2595.0 * np.log10(1.0 + np.asarray(f) / 700.0)

    def mel_to_hz(m):
        return 700.0 * (10.0 ** (np.asarray(m) / 2595.0) - 1.0)

    edges = mel_to_hz(np.linspace(hz_to_mel(f_min), hz_to_mel(f_max), n_mels + 2))
    return edges


def numpy_log_mel(wave: np.ndarray, n_fft: int, hop: int, n_mels: int, f_min: float, f_max: float, eps: float):
    """An independent log-mel: reflect pad, periodic Hann, |rfft|^2, HTK triangles, ln(x + eps)."""
    padded = np.pad(wave.astype(np.float64), n_fft // 2, mode="reflect")
    n_frames = 1 + (len(padded) - n_fft) // hop
    window = 0.5 - 0.5 * np.cos(2 * np.pi * np.arange(n_fft) / n_fft)
    frames = np.stack([padded[i * hop : i * hop + n_fft] * window for i in range(n_frames)])
    power = np.abs(np.fft.rfft(frames, axis=1)) ** 2  # (frames, n_fft // 2 + 1)
    fft_hz = np.linspace(0, SR / 2, n_fft // 2 + 1)
    edges = htk_mel_centres_hz(n_mels, f_min, f_max)
    bank = np.zeros((n_fft // 2 + 1, n_mels))
    for m in range(n_mels):
        lo, mid, hi = edges[m], edges[m + 1], edges[m + 2]
        rising = (fft_hz - lo) / (mid - lo)
        falling = (hi - fft_hz) / (hi - mid)
        bank[:, m] = np.clip(np.minimum(rising, falling), 0, None)
    return np.log(power @ bank + eps)


def test_audiomae_log_mel_matches_independent_numpy_computation():
    rng = np.random.default_rng(0)
    wave = (0.1 * rng.standard_normal(SR)).astype(np.float32) + sine(440, 1.0)
    preset = get_preset("audiomae")
    ours = compute_log_mel(wave, preset)
    reference = numpy_log_mel(wave, 400, 160, 80, 50.0, 8000.0, 1e-6)
    assert ours.shape == reference.shape == (101, 80)
    np.testing.assert_allclose(ours, reference, atol=2e-3, rtol=1e-4)


@pytest.mark.parametrize("preset_name", ["audiomae", "dasheng"])
@pytest.mark.parametrize("bin_index", [5, 20, 40, 60])
def test_sine_at_a_filter_centre_peaks_in_that_mel_bin(preset_name, bin_index):
    preset = get_preset(preset_name)
    centres = htk_mel_centres_hz(preset.n_mels, preset.f_min_hz, preset.f_max_hz)[1:-1]
    mel = compute_log_mel(sine(centres[bin_index], 1.0), preset)
    assert int(mel[10:-10].mean(axis=0).argmax()) == bin_index


@pytest.mark.parametrize("num_samples", [201, 319, 320, 321, 16_000, 160_000, 12_345])
def test_frame_count_is_one_plus_samples_over_hop(num_samples):
    preset = get_preset("audiomae")
    mel = compute_log_mel(np.zeros(num_samples, np.float32), preset)
    assert mel.shape[0] == 1 + num_samples // 160 == preset.num_frames(num_samples)


def test_clip_shorter_than_half_a_window_is_a_clear_error():
    with pytest.raises(ValueError, match="shorter than the 201 samples"):
        compute_log_mel(np.zeros(80, np.float32), get_preset("audiomae"))


def test_presets_have_the_parameters_the_issue_states():
    audiomae, dasheng = get_preset("audiomae"), get_preset("dasheng")
    assert (audiomae.sample_rate_hz, audiomae.n_mels, audiomae.n_fft, audiomae.win_ms, audiomae.hop_ms) == (
        16_000,
        80,
        400,
        25.0,
        10.0,
    )
    assert (audiomae.f_min_hz, audiomae.f_max_hz, audiomae.power, audiomae.log_kind) == (50.0, 8000.0, 2.0, "ln")
    assert audiomae.normalize_per_clip
    assert (dasheng.sample_rate_hz, dasheng.n_mels, dasheng.n_fft, dasheng.win_ms, dasheng.hop_ms) == (
        16_000,
        64,
        512,
        32.0,
        10.0,
    )
    assert dasheng.win_samples == dasheng.n_fft == 512
    assert (dasheng.f_min_hz, dasheng.f_max_hz, dasheng.log_kind, dasheng.top_db) == (0.0, 8000.0, "db", 120.0)


@pytest.mark.parametrize("preset_name,n_mels", [("audiomae", 80), ("dasheng", 64)])
def test_ten_second_clip_shape_per_preset(preset_name, n_mels):
    mel = compute_log_mel(sine(1000, 10.0), get_preset(preset_name))
    assert mel.shape == (1001, n_mels) and mel.dtype == np.float32


def test_dasheng_db_range_is_limited_to_top_db():
    wave = np.concatenate([sine(1000, 0.5), np.zeros(8000, np.float32)])
    mel = compute_log_mel(wave, get_preset("dasheng"))
    assert mel.max() - mel.min() == pytest.approx(120.0, abs=1e-3)


def test_unknown_preset_names_the_choices():
    with pytest.raises(ValueError, match="audiomae"):
        get_preset("kaldi")


@pytest.mark.parametrize("source_rate_hz", [8_000, 22_050, 44_100, 48_000])
def test_resampling_keeps_frequency_amplitude_and_duration(source_rate_hz):
    wave = sine(1000, 2.0, sample_rate_hz=source_rate_hz)
    out = to_mono_16k(wave, source_rate_hz)
    assert out.dtype == np.float32
    assert abs(len(out) - 2 * SR) <= 1
    spectrum = np.abs(np.fft.rfft(out[2000:-2000] * np.hanning(len(out) - 4000)))
    peak_hz = spectrum.argmax() * SR / (len(out) - 4000)
    assert abs(peak_hz - 1000) < 2
    assert np.sqrt(np.mean(out[2000:-2000] ** 2)) == pytest.approx(0.5 / np.sqrt(2), rel=0.01)


def test_to_mono_averages_channels():
    left, right = sine(500, 0.5), sine(3000, 0.5, amplitude=0.25)
    out = to_mono_16k(np.stack([left, right], axis=1), SR)
    np.testing.assert_allclose(out, (left + right) / 2, atol=1e-7)


def test_load_audio_stereo_48k_file_is_mono_mean(tmp_path):
    left, right = sine(500, 0.5, 48_000), -sine(500, 0.5, 48_000)
    path = tmp_path / "stereo.wav"
    soundfile.write(path, np.stack([left, 0.5 * right], axis=1), 48_000, subtype="FLOAT")
    wave, rate = load_audio(path)
    assert rate == 48_000 and wave.ndim == 1
    np.testing.assert_allclose(wave, 0.25 * left, atol=1e-7)


def test_load_audio_rejects_nan_with_a_reason(tmp_path):
    path = tmp_path / "nan.wav"
    soundfile.write(path, np.full(1600, np.nan, np.float32), SR, subtype="FLOAT")
    with pytest.raises(AudioDecodeError, match="1600 NaN"):
        load_audio(path)


def test_load_audio_rejects_text_named_wav(tmp_path):
    path = tmp_path / "notes.wav"
    path.write_text("these are not samples\n")
    with pytest.raises(AudioDecodeError, match="not readable as audio"):
        load_audio(path)


def test_normalize_clip_gives_zero_mean_unit_std():
    mel = compute_log_mel(sine(700, 1.0) + 0.01, get_preset("audiomae"))
    normalized = normalize_clip(mel)
    assert abs(normalized.mean()) < 1e-5 and normalized.std() == pytest.approx(1.0, abs=1e-4)
    assert np.all(np.isfinite(normalize_clip(np.full((10, 80), -13.8, np.float32))))


@pytest.mark.parametrize("preset_name", ["audiomae", "dasheng"])
def test_log_mel_equals_torchaudio_melspectrogram(preset_name):
    import torch
    import torchaudio

    preset = get_preset(preset_name)
    wave = sine(300, 1.0) + 0.05 * np.random.default_rng(1).standard_normal(SR).astype(np.float32)
    reference = torchaudio.transforms.MelSpectrogram(
        sample_rate=SR,
        n_fft=preset.n_fft,
        win_length=preset.win_samples,
        hop_length=preset.hop_samples,
        f_min=preset.f_min_hz,
        f_max=preset.f_max_hz,
        n_mels=preset.n_mels,
        power=preset.power,
    )(torch.from_numpy(wave))
    if preset.log_kind == "ln":
        expected = torch.log(reference + preset.log_eps).T.numpy()
    else:
        expected = torchaudio.transforms.AmplitudeToDB(stype="power", top_db=preset.top_db)(reference).T.numpy()
    np.testing.assert_allclose(compute_log_mel(wave, preset), expected, atol=1e-3, rtol=1e-4)


def test_ssast_preset_is_ssasts_fbank_with_kaldis_empty_filter():
    from torchaudio.compliance.kaldi import get_mel_banks

    from pipeline.audio.frontend import _window_and_filterbank

    ssast = get_preset("ssast")
    # SSAST (Gong et al. 2022) Sec. 3.1 / its Kaldi fbank call: 128 bins, 25 ms window, 10 ms hop, 16 kHz
    assert (ssast.n_mels, ssast.win_samples, ssast.hop_samples, ssast.n_fft) == (128, 400, 160, 512)
    assert (ssast.f_min_hz, ssast.f_max_hz, ssast.log_kind, ssast.normalize_per_clip) == (20.0, 8000.0, "ln", False)
    _, ours = _window_and_filterbank(ssast)
    kaldi, _ = get_mel_banks(128, 512, 16_000.0, 20.0, 0.0, 100.0, -500.0, 1.0)
    assert (ours.sum(0) == 0).nonzero().flatten().tolist() == (kaldi.sum(1) == 0).nonzero().flatten().tolist() == [3]
    mel = compute_log_mel(sine(1000, 2.0), ssast)
    assert mel.shape == (201, 128) and np.all(mel[:, 3] == np.float32(np.log(ssast.log_eps)))
