"""Tiny HEAR-format tasks rendered to wav for evaluation tests (until the corpus tasks exist)."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import soundfile

SAMPLE_RATE_HZ = 16_000


def _tone(rng: np.random.Generator, frequency_hz: float, seconds: float) -> np.ndarray:
    t = np.arange(int(seconds * SAMPLE_RATE_HZ)) / SAMPLE_RATE_HZ
    wave = 0.5 * np.sin(2 * np.pi * frequency_hz * t + rng.uniform(0, 2 * np.pi))
    return wave + 0.02 * rng.standard_normal(len(t))


def _write_task(
    root: Path,
    name: str,
    prediction_type: str,
    labels: list[str],
    clips: dict[str, list[tuple[np.ndarray, list[str]]]],
    *,
    extra_metadata: dict | None = None,
) -> None:
    task_dir = root / name
    metric = "top1_acc" if prediction_type == "multiclass" else "mAP"
    metadata = {
        "task_name": name,
        "version": "test",
        "embedding_type": "scene",
        "prediction_type": prediction_type,
        "split_mode": "trainvaltest",
        "splits": list(clips),
        "sample_duration": 1.0,
        "evaluation": [metric],
        **(extra_metadata or {}),
    }
    task_dir.mkdir(parents=True)
    (task_dir / "task_metadata.json").write_text(json.dumps(metadata))
    with (task_dir / "labelvocabulary.csv").open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["idx", "label"])
        writer.writerows(enumerate(labels))
    for split, items in clips.items():
        audio_dir = task_dir / str(SAMPLE_RATE_HZ) / split
        audio_dir.mkdir(parents=True)
        split_labels = {}
        for index, (wave, clip_labels) in enumerate(items):
            file_name = f"{split}_{index:03d}.wav"
            soundfile.write(audio_dir / file_name, wave.astype(np.float32), SAMPLE_RATE_HZ, subtype="FLOAT")
            split_labels[file_name] = clip_labels
        (task_dir / f"{split}.json").write_text(json.dumps(split_labels))


def build_tiny_tasks(
    root: Path, *, clips_per_class: dict[str, int] | None = None, seed: int = 0, label_noise: float = 0.0
) -> Path:
    """Two tasks under `root`: `tones` (multiclass pitch: 250/500/1000 Hz sines) and `mixtures`
    (multilabel: which of a low tone and white noise are present).

    `label_noise`: the chance that a clip's label is wrong (tones: another pitch's name; mixtures:
    the noise flag flipped), so that no probe scores 1.0 and intervals have something to resample."""
    per_class = clips_per_class or {"train": 10, "valid": 5, "test": 5}
    rng = np.random.default_rng(seed)
    pitches = {"low": 250.0, "mid": 500.0, "high": 1000.0}
    tones = {
        split: [(_tone(rng, hz, 1.0), [label]) for label, hz in pitches.items() for _ in range(n)]
        for split, n in per_class.items()
    }
    for items in tones.values():
        for index, (wave, [label]) in enumerate(items):
            if rng.random() < label_noise:
                items[index] = (wave, [rng.choice([other for other in pitches if other != label])])
    _write_task(root, "tones", "multiclass", list(pitches), tones)
    mixtures = {}
    for split, n in per_class.items():
        items = []
        for _ in range(2 * n):
            has_tone, has_noise = bool(rng.integers(2)), bool(rng.integers(2))
            wave = 0.001 * rng.standard_normal(SAMPLE_RATE_HZ)
            wave += _tone(rng, 300.0, 1.0) if has_tone else 0.0
            wave += 0.3 * rng.standard_normal(SAMPLE_RATE_HZ) if has_noise else 0.0
            has_noise ^= bool(rng.random() < label_noise)
            items.append((wave, [label for label, on in (("tone", has_tone), ("noise", has_noise)) if on]))
        mixtures[split] = items
    _write_task(root, "mixtures", "multilabel", ["tone", "noise"], mixtures)
    return root


def _syllables(
    rng: np.random.Generator, pitches_hz: tuple[float, ...], syllables_per_s: float, seconds: float
) -> np.ndarray:
    """A toy "language": tone syllables cycling through `pitches_hz` at a given rate, with jitter."""
    n_samples = int(seconds * SAMPLE_RATE_HZ)
    wave = 0.01 * rng.standard_normal(n_samples)
    syllable = int(SAMPLE_RATE_HZ / (syllables_per_s * rng.uniform(0.9, 1.1)))
    offset = int(rng.integers(len(pitches_hz)))
    for index, start in enumerate(range(int(rng.integers(syllable)), n_samples - syllable // 2, syllable)):
        length = min(syllable * 2 // 3, n_samples - start)
        hz = pitches_hz[(index + offset) % len(pitches_hz)] * rng.uniform(0.97, 1.03)
        t = np.arange(length) / SAMPLE_RATE_HZ
        wave[start : start + length] += 0.4 * np.hanning(length) * np.sin(2 * np.pi * hz * t)
    return wave


# Toy languages told apart by their syllable pitch pattern and rate (all share the 300-600 Hz range).
TOY_LANGUAGES = {"alto": ((300.0, 600.0), 4.0), "basso": ((450.0,), 6.0), "canto": ((300.0, 450.0, 600.0), 3.0)}


def build_tiny_language_task(
    root: Path, *, clips_per_class: dict[str, int] | None = None, seed: int = 1, name: str = "toy_language"
) -> Path:
    """A multiclass task marked language-ID (`label_kind: language`) of 2 s toy-language clips."""
    per_class = clips_per_class or {"train": 12, "valid": 5, "test": 6}
    rng = np.random.default_rng(seed)
    clips = {
        split: [
            (_syllables(rng, pitches, rate, 2.0), [label])
            for label, (pitches, rate) in TOY_LANGUAGES.items()
            for _ in range(n)
        ]
        for split, n in per_class.items()
    }
    _write_task(
        root,
        name,
        "multiclass",
        list(TOY_LANGUAGES),
        clips,
        extra_metadata={"label_kind": "language", "sample_duration": 2.0},
    )
    return root
