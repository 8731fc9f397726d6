"""The prep output directory: fingerprint, re-run decisions, statistics, manifest, rejected.jsonl.

`manifest.json` is written last and doubles as the completion marker: a directory with parts but no
manifest is an interrupted run, which the next run with the same inputs and settings continues
(`pipeline.prep.progress`) and any other run clears. The directory is a local folder
or a bucket prefix (`s3://...`): every file is read and written through its pyarrow filesystem
(`pipeline.shards.location`), so both take the same decisions.
"""

from __future__ import annotations

import dataclasses
import datetime
import fnmatch
import hashlib
import json
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pyarrow.fs as pafs

import pipeline
from pipeline.audio.input_file import DUPLICATE_KIND, InputFile
from pipeline.cli.errors import UserError
from pipeline.prep import progress
from pipeline.shards.format import (
    MANIFEST_NAME,
    PART_GLOB,
    REJECTED_NAME,
    SHARD_FORMAT_VERSION,
    TARGETS_DIR_NAME,
    read_shard_table,
)
from pipeline.shards.integrity import part_file_problems
from pipeline.shards.location import ShardLocation, locate_shards

OUR_NAMES = (MANIFEST_NAME, REJECTED_NAME, MANIFEST_NAME + ".tmp")  # .tmp: write_manifest's, if it crashed
LOCK_NAME = ".prep.lock"  # pipeline.prep.lock; never deleted: removing a file another run waits on races


class OutputConflictError(UserError):
    """The output directory holds something this run must not silently replace (one line, exit code 2)."""


def compute_fingerprint(settings: dict, inputs: list[InputFile]) -> str:
    """sha256 over the format version, the settings and each input's (source, size, mtime, label, split)."""
    described = sorted((item.source, item.size_bytes, item.mtime_ns, item.label, item.split) for item in inputs)
    payload = json.dumps({"format": SHARD_FORMAT_VERSION, "settings": settings, "inputs": described}, sort_keys=True)
    return hashlib.sha256(payload.encode()).hexdigest()


def prepare_output_dir(output_dir: str | Path, *, fingerprint: str, settings: dict, overwrite: bool) -> bool:
    """Make `output_dir` (a local folder or a bucket URI) ready for a run. Returns True when a
    finished run with this fingerprint is already there (nothing to do); raises
    `OutputConflictError` when it holds something else."""
    location = locate_shards(output_dir)
    found = location.filesystem.get_file_info(location.path)
    if found.type == pafs.FileType.NotFound:
        location.filesystem.create_dir(location.path)
        return False
    if found.type != pafs.FileType.Directory:
        raise OutputConflictError(f"--output {output_dir} exists and is not a directory")
    _refuse_foreign_files(location, output_dir)
    manifest_text = location.read_text(MANIFEST_NAME)
    if manifest_text is not None and not overwrite:
        try:
            previous = json.loads(manifest_text)
        except json.JSONDecodeError:  # written atomically, so damaged since: like an interrupted run
            previous = {"fingerprint": fingerprint, "part_files": None}
        if previous.get("fingerprint") == fingerprint:
            damage = part_file_problems(location, previous)
            if not damage:
                progress.clear_progress(location)  # left if the run stopped between its manifest and this
                return True
            # Only prep's own files are here (checked above), so making them again loses nothing.
            print(
                f"prep: {output_dir} holds these inputs with these settings, but {damage[0]}"
                f"{f' (and {len(damage) - 1} more)' if len(damage) > 1 else ''}; making it again",
                file=sys.stderr,
            )
            clear_output_dir(output_dir)
            return False
        changed = [key for key in settings if previous.get("settings", {}).get(key) != settings[key]]
        if not changed and int(previous.get("format_version", 1)) < SHARD_FORMAT_VERSION:
            # Same settings written in an older row layout: readers would be slower or wrong; remake them.
            print(
                f"prep: {output_dir} was written in shard format {previous.get('format_version', 1)}, this version "
                f"writes format {SHARD_FORMAT_VERSION}; making it again",
                file=sys.stderr,
            )
            clear_output_dir(output_dir)
            return False
        what = f"settings differ ({', '.join(changed)})" if changed else "the input files differ"
        raise OutputConflictError(
            f"--output {output_dir} already holds shards made with other inputs or settings: {what}. "
            "Use a new --output directory, or pass --overwrite to replace them."
        )
    plan = progress.read_plan(location)
    if manifest_text is None and not overwrite and plan is not None and plan.get("fingerprint") == fingerprint:
        return False  # a run of these inputs and settings cut short: continued, not cleared
    clear_output_dir(output_dir)
    return False


def _refuse_foreign_files(location: ShardLocation, output_dir: str | Path) -> None:
    """Prep never replaces what it did not write: anything but its own files is an error naming them."""
    foreign = [
        name
        for name in _entry_names(location)
        if name not in (*OUR_NAMES, LOCK_NAME, TARGETS_DIR_NAME, progress.PROGRESS_DIR)
        and not fnmatch.fnmatchcase(name, PART_GLOB)
    ]
    if foreign:
        raise OutputConflictError(
            f"--output {output_dir} holds files that are not mel shards ({', '.join(sorted(foreign)[:3])}"
            f"{', ...' if len(foreign) > 3 else ''}); choose a new or empty directory"
        )


def _entry_names(location: ShardLocation) -> list[str]:
    """Names directly inside the output (files and folders; on a bucket, the next level of keys)."""
    selector = pafs.FileSelector(location.path, allow_not_found=True, recursive=False)
    return [info.base_name for info in location.filesystem.get_file_info(selector)]


def clear_output_dir(output_dir: str | Path) -> None:
    """Remove only what prep writes (parts, manifest, rejected.jsonl, the progress of a run cut short)."""
    location = locate_shards(output_dir)
    progress.clear_progress(location)
    selector = pafs.FileSelector(location.path, allow_not_found=True, recursive=False)
    for info in location.filesystem.get_file_info(selector):
        if fnmatch.fnmatchcase(info.base_name, PART_GLOB) or info.base_name in OUR_NAMES:
            if info.type == pafs.FileType.Directory:
                location.filesystem.delete_dir(info.path)
            else:
                location.filesystem.delete_file(info.path)


@dataclasses.dataclass(kw_only=True)
class RowStatistics:
    sources: set[str]
    num_rows: int
    total_frames: int
    total_audio_s: float
    bin_mean: list[float]
    bin_std: list[float]
    rows_by_split: dict[str, int]


def compute_row_statistics(output_dir: str | Path, n_mels: int) -> RowStatistics:
    """Per-bin mean/std and counts from the small per-row columns; the mel matrices are not read."""
    if not locate_shards(output_dir).file_names(PART_GLOB):
        return RowStatistics(
            sources=set(),
            num_rows=0,
            total_frames=0,
            total_audio_s=0.0,
            bin_mean=[0.0] * n_mels,
            bin_std=[0.0] * n_mels,
            rows_by_split={},
        )
    table = read_shard_table(
        output_dir, columns=["source", "split", "duration_s", "num_frames", "mel_bin_sum", "mel_bin_sq_sum"]
    )
    total_frames = int(table["num_frames"].to_numpy().sum())
    bin_sum = table["mel_bin_sum"].combine_chunks().flatten().to_numpy().reshape(-1, n_mels).sum(axis=0)
    bin_sq_sum = table["mel_bin_sq_sum"].combine_chunks().flatten().to_numpy().reshape(-1, n_mels).sum(axis=0)
    mean = bin_sum / max(total_frames, 1)
    std = np.sqrt(np.maximum(bin_sq_sum / max(total_frames, 1) - mean**2, 0.0))
    splits = Counter(split for split in table["split"].to_pylist() if split is not None)
    return RowStatistics(
        sources=set(table["source"].to_pylist()),
        num_rows=table.num_rows,
        total_frames=total_frames,
        total_audio_s=float(table["duration_s"].to_numpy().sum()),
        bin_mean=[round(float(v), 6) for v in mean],
        bin_std=[round(float(v), 6) for v in std],
        rows_by_split=dict(sorted(splits.items())),
    )


def write_rejected(output_dir: str | Path, rejected: list[dict]) -> None:
    # ensure_ascii: a name that is not UTF-8 (a lone surrogate in Python) is written as an escape
    # instead of failing the write and, with it, the whole run.
    lines = [json.dumps(record, ensure_ascii=True) for record in sorted(rejected, key=lambda r: r["path"])]
    _write_text(locate_shards(output_dir), REJECTED_NAME, "".join(line + "\n" for line in lines))


def write_manifest(output_dir: str | Path, manifest: dict) -> None:
    location = locate_shards(output_dir)
    text = json.dumps(manifest, indent=2, ensure_ascii=False) + "\n"
    if not isinstance(location.filesystem, pafs.LocalFileSystem):
        # An object store's PUT is atomic: the manifest is there whole or not at all.
        _write_text(location, MANIFEST_NAME, text)
        return
    # On a disk, through a temporary name so a crash never leaves a half manifest that looks finished.
    _write_text(location, MANIFEST_NAME + ".tmp", text)
    location.filesystem.move(location.child_path(MANIFEST_NAME + ".tmp"), location.child_path(MANIFEST_NAME))


def _write_text(location: ShardLocation, name: str, text: str) -> None:
    with location.filesystem.open_output_stream(location.child_path(name)) as stream:
        stream.write(text.encode("utf-8"))


def build_manifest(
    *,
    fingerprint: str,
    settings: dict,
    preset: dict,
    input_path: str,
    num_listed: int,
    num_inputs: int,
    stats: RowStatistics,
    rejected: list[dict],
    partial: list[dict],
    dropped_tail_s: float,
    silent: list[dict],
    skipped_non_audio: int,
    skipped_symlink_loops: list[str],
    part_files: list[dict],
    elapsed_s: float,
) -> dict:
    return {
        "format_version": SHARD_FORMAT_VERSION,
        "audioscale_version": pipeline.__version__,
        "created_utc": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "fingerprint": fingerprint,
        "input": input_path,
        "settings": settings,
        "preset": preset,
        "n_mels": preset["n_mels"],
        "sample_rate_hz": preset["sample_rate_hz"],
        "hop_ms": preset["hop_ms"],
        "num_listed_inputs": num_listed,  # before --max-hours
        "num_inputs": num_inputs,
        "num_rows": stats.num_rows,
        "num_rejected": len(rejected),
        "rejected_by_kind": dict(Counter(record["kind"] for record in rejected).most_common()),
        # Second names of a file already listed (./x.wav, an absolute path, a link): counted once.
        "duplicate_inputs": [
            {"path": r["path"], "reason": r["reason"]} for r in rejected if r["kind"] == DUPLICATE_KIND
        ],
        "num_partial": len(partial),
        "partial_inputs": partial,  # decoded part-way: rows hold what came before the error
        "dropped_tail_s": round(dropped_tail_s, 6),  # tails shorter than one analysis window
        # Rows of (near-)digital silence, per input (pipeline.audio.segments.SILENT_PEAK): counted in
        # total_hours like any audio, and named so a silent recording is not mistaken for data.
        "silent_hours": sum(record["silent_s"] for record in silent) / 3600.0,
        "silent_inputs": sorted(silent, key=lambda record: -record["silent_s"]),
        "skipped_non_audio_files": skipped_non_audio,
        "skipped_symlink_loops": skipped_symlink_loops,
        "total_hours": stats.total_audio_s / 3600.0,
        "total_frames": stats.total_frames,
        "rows_by_split": stats.rows_by_split,
        "mean": stats.bin_mean,  # per mel bin, over every stored frame
        "std": stats.bin_std,
        "part_files": part_files,  # [{"name", "rows", "bytes", "sha256"}]: pipeline.shards.integrity
        "elapsed_s": round(elapsed_s, 3),
    }
