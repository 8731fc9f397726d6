"""Tiny real shards for the pretraining tests: espeak-ng speech through `pipeline.prep.run`.

Built once per pytest session (`session_shards`) under the session's base temp directory, so the
in-process tests and the subprocess tests (multi-node, job submission) share one set.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

SENTENCES = [
    "The quick brown fox jumps over the lazy dog near the river bank.",
    "Scaling laws relate model size, data and compute to the final loss.",
    "Masked autoencoders reconstruct the patches that were hidden from them.",
    "A spectrogram shows how the energy of a sound changes over time.",
    "Rain fell on the old roof all night while the wind kept blowing.",
    "Seven silver swans swam silently southward in the cold morning air.",
    "Please call the office before noon to confirm your appointment.",
    "Numbers such as forty two and nineteen eighty four are easy to say.",
]
VOICES = ["en", "en-us", "en-gb-x-rp", "de"]
SEGMENT_S = 1.5  # rows of 150 frames: one 100-frame test crop each, at a random offset


def write_speech(audio_dir: Path) -> None:
    audio_dir.mkdir(parents=True, exist_ok=True)
    for index, sentence in enumerate(SENTENCES):
        for voice_index, voice in enumerate(VOICES[:3]):
            out = audio_dir / f"speech-{index:02d}-{voice_index}.wav"
            subprocess.run(
                ["espeak-ng", "-v", voice, "-s", str(140 + 15 * voice_index), "-w", str(out), sentence],
                check=True,
                capture_output=True,
            )


def make_tiny_shards(root: Path, *, preset_name: str = "audiomae") -> Path:
    """`root/shards-<preset>` made by prep from about 90 s of synthetic speech (cached per root)."""
    if shutil.which("espeak-ng") is None:
        pytest.skip("espeak-ng is not installed (scripts/env.sh installs it)")
    from pipeline.prep.run import PrepConfig, run_prep

    shards_dir = root / f"shards-{preset_name}"
    if (shards_dir / "manifest.json").is_file():
        return shards_dir
    write_speech(root / "speech")
    run_prep(
        PrepConfig(
            input_path=root / "speech",
            output_dir=shards_dir,
            preset_name=preset_name,
            segment_s=SEGMENT_S,
            show_progress=False,
        )
    )
    return shards_dir
