"""Audio synthesised on the spot, and shards made from it by prep's own per-file code (no Ray).

The GPU machines have no network and no corpus, so the audio is made here: three kinds of sound,
each with random parameters per clip (a class label the probe check predicts):
- "tone": a harmonic stack (5 partials, 1/k amplitudes) with vibrato, 100-600 Hz fundamental;
- "chirp": a sine gliding exponentially between two random frequencies, 200-4000 Hz;
- "noise": white noise bursts, low-passed by a random one-pole filter, under a random envelope.
Rows are what `pipeline.prep.featurize` writes: `featurize_file` (the preset's front end, segment by
segment) -> `segments_to_table`, in part files of PARQUET_WRITE_OPTIONS, with the manifest prep builds
(`build_manifest`, per-bin statistics from `compute_row_statistics`, part checksums).
"""

from __future__ import annotations

import hashlib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import scipy.signal
import soundfile

from pipeline.audio.frontend import TARGET_SAMPLE_RATE_HZ, get_preset
from pipeline.audio.segments import FileOutcome, featurize_file
from pipeline.prep.output import build_manifest, compute_row_statistics, write_manifest
from pipeline.shards.format import PARQUET_WRITE_OPTIONS, segments_to_table
from pipeline.shards.integrity import describe_part_files
from pipeline.shards.location import locate_shards

SOUND_KINDS = ("tone", "chirp", "noise")
ROWS_PER_PART = 100  # prep's ROWS_PER_OUTPUT_TABLE: one table (row group) per 100 segments


def synthesise(kind: str, seconds: float, rng: np.random.Generator) -> np.ndarray:
    """float32 (samples,) at 16 kHz, peak about 0.5."""
    t = np.arange(int(seconds * TARGET_SAMPLE_RATE_HZ)) / TARGET_SAMPLE_RATE_HZ
    if kind == "tone":
        f0 = rng.uniform(100, 600) * (1 + 0.01 * np.sin(2 * np.pi * rng.uniform(3, 7) * t))
        phase = 2 * np.pi * np.cumsum(f0) / TARGET_SAMPLE_RATE_HZ
        wave = sum(np.sin(k * phase) / k for k in range(1, 6))
    elif kind == "chirp":
        low, high = sorted(rng.uniform(200, 4000, size=2))
        period = rng.uniform(0.5, 2.0)
        frequency = low * (high / low) ** ((t % period) / period)
        wave = np.sin(2 * np.pi * np.cumsum(frequency) / TARGET_SAMPLE_RATE_HZ)
    else:
        pole = rng.uniform(0.0, 0.95)
        filtered = scipy.signal.lfilter([1 - pole], [1, -pole], rng.standard_normal(len(t)))
        envelope = (np.sin(2 * np.pi * rng.uniform(0.5, 3) * t) > rng.uniform(-0.5, 0.5)).astype(float)
        wave = filtered * (0.2 + envelope)
    wave = wave / max(np.abs(wave).max(), 1e-9) * 0.5
    return wave.astype(np.float32)


def write_audio(folder: Path, *, clips_per_kind: int, seconds: float, seed: int = 0) -> list[tuple[Path, str]]:
    """`clips_per_kind` WAV files of each kind: [(path, kind)]."""
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    files = []
    for index in range(clips_per_kind):
        for kind in SOUND_KINDS:
            path = folder / f"{kind}-{index:04d}.wav"
            soundfile.write(path, synthesise(kind, seconds, rng), TARGET_SAMPLE_RATE_HZ, subtype="FLOAT")
            files.append((path, kind))
    return files


def _featurize(item: tuple[Path, str], preset_name: str, segment_s: float) -> list[tuple]:
    path, kind = item
    outcome = FileOutcome()
    segments = list(featurize_file(path, get_preset(preset_name), segment_s, outcome))
    if not segments:
        raise RuntimeError(f"{path}: prep's front end gave no segments ({outcome.rejection_reason})")
    return [(path.name, kind, None, segment) for segment in segments]


def write_shards(files: list[tuple[Path, str]], out_dir: Path, *, preset_name: str, segment_s: float,
                 threads: int) -> Path:  # fmt: skip
    """A shard folder of `files` under `preset_name`, as prep would write it (one part per 100 segments)."""
    preset = get_preset(preset_name)
    out_dir.mkdir(parents=True, exist_ok=True)
    with ThreadPoolExecutor(max_workers=threads) as pool:
        rows = [row for rows in pool.map(lambda item: _featurize(item, preset_name, segment_s), files) for row in rows]
    for part, start in enumerate(range(0, len(rows), ROWS_PER_PART)):
        table = segments_to_table(rows[start : start + ROWS_PER_PART], preset.n_mels)
        pq.write_table(table, out_dir / f"part-{part:05d}.parquet", **PARQUET_WRITE_OPTIONS)
    fingerprint = hashlib.sha256(f"{out_dir}:{preset_name}:{len(files)}".encode()).hexdigest()
    manifest = build_manifest(
        fingerprint=fingerprint, settings={"preset": preset_name, "segment_s": segment_s}, preset=preset.to_dict(),
        input_path=str(files[0][0].parent), num_listed=len(files), num_inputs=len(files),
        stats=compute_row_statistics(out_dir, preset.n_mels), rejected=[], partial=[], dropped_tail_s=0.0, silent=[],
        skipped_non_audio=0, skipped_symlink_loops=[], part_files=describe_part_files(locate_shards(out_dir)),
        elapsed_s=0.0,
    )  # fmt: skip
    write_manifest(out_dir, manifest)
    return out_dir
