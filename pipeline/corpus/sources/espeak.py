"""Synthetic speech from espeak-ng: random word sequences from Debian word lists, many voice variants."""

from __future__ import annotations

import dataclasses
import functools
import os
import subprocess
import tempfile
from pathlib import Path

import numpy as np

from pipeline.corpus.sources.audio_io import decode_16k_mono
from pipeline.corpus.sources.holdout import word_split
from pipeline.session.worker_pool import map_ordered

# language -> (espeak-ng voice, word list, its Debian package, its encoding)
LANGUAGES: dict[str, tuple[str, Path, str, str]] = {
    "en": ("en-us", Path("/usr/share/dict/american-english"), "wamerican", "utf-8"),
    "de": ("de", Path("/usr/share/dict/ngerman"), "wngerman", "utf-8"),
    "fr": ("fr-fr", Path("/usr/share/dict/french"), "wfrench", "utf-8"),
    "it": ("it", Path("/usr/share/dict/italian"), "witalian", "utf-8"),
    "es": ("es", Path("/usr/share/dict/spanish"), "wspanish", "utf-8"),
    "nl": ("nl", Path("/usr/share/dict/dutch"), "wdutch", "utf-8"),
    "sv": ("sv", Path("/usr/share/dict/swedish"), "wswedish", "latin-1"),
    "pt": ("pt", Path("/usr/share/dict/portuguese"), "wportuguese", "utf-8"),
    "da": ("da", Path("/usr/share/dict/danish"), "wdanish", "utf-8"),
}


@dataclasses.dataclass(frozen=True, kw_only=True)
class SpeechRequest:
    text: str
    voice: str  # espeak-ng voice, e.g. "de"
    variant: str  # voice variant, e.g. "m3"
    speed_wpm: int
    pitch: int  # espeak-ng pitch 0..99


@functools.lru_cache(maxsize=16)
def _words_by_split(language: str) -> dict[str, tuple[str, ...]]:
    _, path, package, encoding = LANGUAGES[language]
    if not path.is_file():
        raise FileNotFoundError(f"word list {path} is missing: install the Debian package {package}")
    by_split: dict[str, list[str]] = {"train": [], "valid": [], "test": []}
    for line in path.read_text(encoding=encoding).splitlines():
        word = line.strip()
        if 3 <= len(word) <= 12 and word.isalpha() and word == word.lower():
            by_split[word_split(word)].append(word)
    return {split: tuple(words) for split, words in by_split.items()}


def load_words(language: str, split: str) -> tuple[str, ...]:
    """Common words of `language` (lower-case, letters only, 3-12 long) that belong to `split`."""
    return _words_by_split(language)[split]


def random_sentence(rng: np.random.Generator, language: str, split: str, *, n_words: int) -> str:
    words = load_words(language, split)
    return " ".join(words[int(index)] for index in rng.integers(0, len(words), size=n_words))


def synthesize(request: SpeechRequest, work_dir: Path) -> np.ndarray:
    """One utterance as float32 16 kHz mono (espeak-ng writes 22,050 Hz wav)."""
    # A fresh name per call: two identical requests may run at the same time on the pool.
    handle, name = tempfile.mkstemp(prefix="espeak_", suffix=".wav", dir=work_dir)
    os.close(handle)
    wav_path = Path(name)
    command = [
        "espeak-ng",
        "-v",
        f"{request.voice}+{request.variant}",
        "-s",
        str(request.speed_wpm),
        "-p",
        str(request.pitch),
        "-w",
        str(wav_path),
        "--",
        request.text,
    ]
    completed = subprocess.run(command, capture_output=True, check=False)
    if completed.returncode != 0 or not wav_path.is_file():
        raise RuntimeError(f"espeak-ng failed for {request}: {completed.stderr.decode(errors='replace').strip()}")
    wave = decode_16k_mono(wav_path)
    wav_path.unlink()
    return wave


def synthesize_all(requests: list[SpeechRequest], work_dir: Path) -> list[np.ndarray]:
    work_dir.mkdir(parents=True, exist_ok=True)
    return map_ordered(lambda request: synthesize(request, work_dir), requests)
