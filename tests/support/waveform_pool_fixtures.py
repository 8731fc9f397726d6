"""Shards made from real audio files, with their sources, for RankMe pools played as audio.

The rows are what prep writes (`iter_segments`: 2 s segments of each file, log-mel, offsets),
written directly (no Ray) with the manifest's `input` naming the audio folder, so
`pipeline.rankme.waveform_pool` can find each row's source. Files are 4.7 s: segments of 2, 2
and 0.7 s, i.e. 2 + 2 + 1 crops of 1 s (100 frames), the last one padded.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import soundfile

from pipeline.audio.frontend import get_preset
from pipeline.audio.segments import Segment, iter_segments
from pipeline.shards.format import segments_to_table
from pipeline.shards.integrity import describe_part_files
from pipeline.shards.location import locate_shards

SAMPLE_RATE_HZ = 16_000
SOURCE_SECONDS = 4.7
SEGMENT_S = 2.0
CROP_FRAMES = 100  # 1 s of 10 ms frames
SOURCES = ("clip0.wav", "clip1.wav", "sub/clip2.wav", "sub/clip3.wav")  # relative to the input folder


def _source_wave(rng: np.random.Generator, index: int) -> np.ndarray:
    t = np.arange(int(SOURCE_SECONDS * SAMPLE_RATE_HZ)) / SAMPLE_RATE_HZ
    chirp = np.sin(2 * np.pi * (200.0 * (index + 1) + 150.0 * t) * t)
    return (0.4 * chirp + 0.1 * rng.standard_normal(len(t))).astype(np.float32)


def write_audio_shards(root: Path, *, preset_name: str = "audiomae") -> tuple[Path, Path]:
    """(shards_dir, audio_dir) under `root`: 4 source files, their 12 segment rows in 2 part files,
    log-mels of the front end `preset_name` (80 bins for audiomae, 64 for dasheng)."""
    rng = np.random.default_rng(0)
    audio_dir, shards_dir = root / "audio", root / "shards"
    preset = get_preset(preset_name)
    rows = []
    for index, source in enumerate(SOURCES):
        path = audio_dir / source
        path.parent.mkdir(parents=True, exist_ok=True)
        soundfile.write(path, _source_wave(rng, index), SAMPLE_RATE_HZ, subtype="FLOAT")
        rows += [
            (source, None, None, item) for item in iter_segments(path, preset, SEGMENT_S) if isinstance(item, Segment)
        ]
    shards_dir.mkdir(parents=True)
    half = len(rows) // 2
    pq.write_table(segments_to_table(rows[:half], preset.n_mels), shards_dir / "part-00000.parquet")
    pq.write_table(segments_to_table(rows[half:], preset.n_mels), shards_dir / "part-00001.parquet")
    manifest = {"input": str(audio_dir), "hop_ms": preset.hop_ms, "n_mels": preset.n_mels, "num_rows": len(rows),
                "preset": preset.to_dict(), "mean": [0.0] * preset.n_mels, "std": [1.0] * preset.n_mels,
                "rows_by_split": {}, "part_files": describe_part_files(locate_shards(shards_dir))}  # fmt: skip
    (shards_dir / "manifest.json").write_text(json.dumps(manifest))
    return shards_dir, audio_dir
