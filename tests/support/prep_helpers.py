"""Audio files and prepared shard directories shared by the prep/shards tests.

Each prep run costs seconds on 2 cores, so the two shard directories the tests read are made once
per session (cached here by name) and treated as read-only; tests that modify shards copy them.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import soundfile

from pipeline.prep.run import PrepConfig, run_prep

SR = 16_000
_CACHE: dict[str, Path] = {}


def tone(
    seconds: float,
    sample_rate_hz: int = SR,
    freq_hz: float = 440.0,
    amplitude: float = 0.3,
    channels: int = 1,
    seed: int = 0,
) -> np.ndarray:
    """A sine plus a little noise (so no mel bin is exactly constant); (samples,) or (samples, channels)."""
    rng = np.random.default_rng(seed)
    t = np.arange(int(round(seconds * sample_rate_hz))) / sample_rate_hz
    wave = amplitude * np.sin(2 * np.pi * freq_hz * t) + 0.01 * rng.standard_normal(len(t))
    wave = wave.astype(np.float32)
    return np.stack([wave] * channels, axis=1) if channels > 1 else wave


def write_clips(root: Path, count: int) -> Path:
    """`count` tones of 2.5 s and longer (a quarter second more each), clipNN.wav in `root`."""
    root.mkdir(parents=True)
    for index in range(count):
        wave = tone(2.5 + 0.25 * index, freq_hz=150 + 40 * index, seed=index)
        soundfile.write(root / f"clip{index:02d}.wav", wave, SR)
    return root


def write_labeled_corpus(root: Path) -> Path:
    """Six short clips with labels and splits, listed in a JSONL manifest; returns the manifest."""
    root.mkdir(parents=True, exist_ok=True)
    lines = []
    for index, (seconds, label, split) in enumerate(
        [
            (3.0, "dog", "train"),
            (12.5, "cat", "train"),
            (1.2, "dog", "train"),
            (4.0, "cat", "test"),
            (2.0, "dog", "test"),
            (0.8, "cat", "train"),
        ]
    ):
        name = f"clip_{index}.wav"
        soundfile.write(root / name, tone(seconds, freq_hz=300 + 150 * index, seed=index), SR)
        lines.append(json.dumps({"path": name, "label": label, "split": split}))
    manifest = root / "manifest.jsonl"
    manifest.write_text("\n".join(lines) + "\n")
    return manifest


def labeled_shards(tmp_path_factory, preset_name: str = "audiomae") -> Path:
    """A finished shard directory of `write_labeled_corpus` (made once per session and preset)."""
    key = f"labeled-{preset_name}"
    if key not in _CACHE:
        base = tmp_path_factory.mktemp(key)
        manifest = write_labeled_corpus(base / "audio")
        result = run_prep(
            PrepConfig(
                input_path=manifest,
                output_dir=base / "shards",
                preset_name=preset_name,
                segment_s=5.0,
                show_progress=False,
            )
        )
        assert result.exit_code == 0
        _CACHE[key] = base / "shards"
    return _CACHE[key]


def write_bad_inputs(root: Path) -> dict[str, str]:
    """Every bad-input case from the issue; returns source -> expected outcome ("rows" or a kind)."""
    expected: dict[str, str] = {}
    root.mkdir(parents=True, exist_ok=True)

    def add(name: str, outcome: str) -> Path:
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        expected[name] = outcome
        return path

    add("empty.wav", "empty file").write_bytes(b"")
    add("random_bytes.wav", "not audio").write_bytes(np.random.default_rng(1).bytes(4096))
    add("text.wav", "not audio").write_text("This is a text file with a .wav name.\n" * 20)
    soundfile.write(add("zero_length.wav", "zero-length"), np.zeros(0, np.float32), SR)
    reference = root / "reference.bin"
    soundfile.write(reference, tone(3.0), SR, format="WAV", subtype="PCM_16")
    whole = reference.read_bytes()
    reference.unlink()
    add("header_no_data.wav", "zero-length").write_bytes(whole[:44])
    add("truncated.wav", "rows").write_bytes(whole[: len(whole) // 2])
    soundfile.write(add("all_nan.wav", "non-finite samples"), np.full(SR, np.nan, np.float32), SR, subtype="FLOAT")
    partly_inf = tone(1.0)
    partly_inf[100:110] = np.inf
    soundfile.write(add("partly_inf.wav", "non-finite samples"), partly_inf, SR, subtype="FLOAT")
    soundfile.write(add("silence.wav", "rows"), np.zeros(2 * SR, np.float32), SR, subtype="PCM_16")
    soundfile.write(add("clip_5ms.wav", "too short"), tone(0.005), SR)
    soundfile.write(add("pcm_u8.wav", "rows"), tone(1.0), SR, subtype="PCM_U8")
    soundfile.write(add("pcm_24.wav", "rows"), tone(1.0), SR, subtype="PCM_24")
    soundfile.write(add("float32.wav", "rows"), tone(1.0), SR, subtype="FLOAT")
    soundfile.write(add("stereo_48k.wav", "rows"), tone(1.5, 48_000, channels=2), 48_000)
    soundfile.write(add("mono_8k.wav", "rows"), tone(1.5, 8_000, freq_hz=1000), 8_000)
    soundfile.write(add("tone.mp3", "rows"), tone(2.0, 44_100), 44_100, format="MP3")
    soundfile.write(add("tone.ogg", "rows"), tone(2.0, 22_050), 22_050, format="OGG", subtype="VORBIS")
    # 12 minutes at 8 kHz as FLAC of a quiet tone: cheap to write, 72 ten-second segments.
    soundfile.write(add("long_12min.flac", "rows"), tone(720.0, 8_000, amplitude=0.05), 8_000, subtype="PCM_16")
    soundfile.write(add("name with spaces.wav", "rows"), tone(1.0), SR)
    soundfile.write(add("nested/deeper/Grüße 日本語 é.wav", "rows"), tone(1.0), SR)
    (root / "nested" / "notes.txt").write_text("not audio, skipped by extension\n")
    os.symlink("..", root / "nested" / "loop_to_parent")  # a folder loop the walk must not follow twice
    os.symlink("does_not_exist.wav", add("dangling_link.wav", "broken symlink"))
    # A name whose bytes are not UTF-8 (Latin-1 "café"): rejected by name, never the whole run.
    soundfile.write(root / "latin1.tmp.wav", tone(1.0), SR)
    os.rename(root / "latin1.tmp.wav", os.fsencode(root) + b"/caf\xe9.wav")
    expected["caf\\xe9.wav"] = "file name not UTF-8"
    return expected
