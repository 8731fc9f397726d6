"""A tiny waveform shard set of real speech for the k-means target stage and the HuBERT tests.

espeak-ng renders a few sentences (~15 s at 16 kHz); the rows are what prep writes for the
`waveform` preset (`iter_segments`: 3 s segments of 20 ms sample frames), written directly (no Ray)
into two part files with a manifest that carries a fingerprint, the preset and the part checksums.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import soundfile

from pipeline.audio.frontend import get_preset, load_audio, to_mono_16k
from pipeline.audio.segments import Segment, iter_segments
from pipeline.shards.format import segments_to_table
from pipeline.shards.integrity import describe_part_files
from pipeline.shards.location import locate_shards

SENTENCES = [
    "The quick brown fox jumps over the lazy dog while the band plays on.",
    "Seven silver swans swam silently seaward under a pale morning sky.",
    "Audio models learn structure by filling in the parts of a spectrogram they cannot see.",
]
SEGMENT_S = 3.0


def render_speech(out_dir: Path) -> list[Path]:
    """One 16 kHz wav file per sentence (espeak-ng at 150 words a minute)."""
    if shutil.which("espeak-ng") is None:
        raise RuntimeError("espeak-ng is missing: install the Debian packages in scripts/debian-packages.txt")
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for index, sentence in enumerate(SENTENCES):
        raw = out_dir / f"raw{index}.wav"
        subprocess.run(["espeak-ng", "-s", "150", "-w", str(raw), sentence], check=True)
        wave, rate = load_audio(raw)
        paths.append(out_dir / f"sentence{index}.wav")
        soundfile.write(paths[-1], to_mono_16k(wave, rate), 16_000, subtype="FLOAT")
    return paths


def write_speech_waveform_shards(root: Path) -> Path:
    """`root/shards`: the speech as waveform-preset segment rows in two part files, with a manifest."""
    preset = get_preset("waveform")
    rows = []
    for path in render_speech(root / "audio"):
        segments = [item for item in iter_segments(path, preset, SEGMENT_S) if isinstance(item, Segment)]
        rows += [(path.name, None, None, segment) for segment in segments]
    shards = root / "shards"
    shards.mkdir(parents=True)
    half = len(rows) // 2
    pq.write_table(segments_to_table(rows[:half], preset.n_mels), shards / "part-00000.parquet")
    pq.write_table(segments_to_table(rows[half:], preset.n_mels), shards / "part-00001.parquet")
    frames = sum(len(segment.mel) for *_, segment in rows)
    manifest = {
        "fingerprint": hashlib.sha256(str(root).encode()).hexdigest(), "input": str(root / "audio"),
        "preset": preset.to_dict(), "n_mels": preset.n_mels, "hop_ms": preset.hop_ms, "num_rows": len(rows),
        "total_hours": frames * 0.02 / 3600, "mean": [0.0] * preset.n_mels, "std": [1.0] * preset.n_mels,
        "rows_by_split": {}, "part_files": describe_part_files(locate_shards(shards)),
    }  # fmt: skip
    (shards / "manifest.json").write_text(json.dumps(manifest))
    return shards


def speech_waveform(root: Path) -> np.ndarray:
    """The rendered sentences back to back: float32 (samples,) at 16 kHz."""
    return np.concatenate([load_audio(path)[0] for path in render_speech(root)])
