"""The mel shard format: how segment rows are laid out in Parquet, and how to read them back.

A shard directory holds `part-*.parquet` (zstd), `manifest.json` and `rejected.jsonl`.

The `mel` column is `large_binary`: each row holds its (num_frames, n_mels) float16 matrix as raw
little-endian bytes, frame after frame (C order); `np.frombuffer(row["mel"], "<f2").reshape(-1, n_mels)`
reads one back, n_mels from the manifest (or bytes / 2 / num_frames). It is plain Arrow (no Ray
extension type), so pyarrow, pandas, polars and DuckDB read it without Ray. The bytes of a whole
column sit in one buffer, so `mel_matrices` and `flat_mels` are zero-copy.
Why bytes and not a nested `list<fixed_size_list<float16>>` (format 1): Parquet stores a nested
list with repetition and definition levels for every value, and decoding those was the training
reader's main cost; the same rows as bytes decode 2.8x faster at 2% less storage (docs/performance.md,
the reader budget per GPU). `mel_matrices` still reads format-1 shards.
`mel_bin_sum` / `mel_bin_sq_sum` (float64, per mel bin, over the row's stored float16 values) let
the prep stage compute the dataset's per-bin mean/std without reading the matrices twice.

Every reader takes a local folder or a URI (`s3://`, `gs://`, `file://`, ...; see
`pipeline.shards.location`), so a cluster reads the same directory copied to a bucket.

Reading without Ray: `read_shard_table(dir)`, or by hand
`pd.concat(pd.read_parquet(p) for p in sorted(Path(dir).glob("part-*.parquet")))` and
`mel_from_row(row)`. Pass the part files, not the folder: `pd.read_parquet(dir)` also tries to
parse manifest.json as Parquet and fails.

The training reader reads these files with plain pyarrow too: `pipeline.shards.crop_stream` (each
worker's crops) and `pipeline.shards.crops` (cropping, normalising, the fixed crop samples).
"""

from __future__ import annotations

import hashlib
import itertools
import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from pipeline.audio.segments import Segment
from pipeline.shards.integrity import (
    PART_GLOB,
    ShardIntegrityError,
    verified_part_names,
)
from pipeline.shards.location import is_uri, locate_shards

MANIFEST_NAME = "manifest.json"
REJECTED_NAME = "rejected.jsonl"
# The k-means codebooks `python -m pipeline.targets` fits on this shard set, keyed by its fingerprint;
# prep leaves the folder alone (a re-run reuses or remakes the shards, stale codebooks never match).
TARGETS_DIR_NAME = "targets"
SHARD_FORMAT_VERSION = 2  # bump when the row layout changes; part of every fingerprint (2: mel as bytes)
# How a part file is written (prep, and anything else that writes shards). Dictionary pages and min/max
# statistics only pay off for the string columns; on the mel bytes they tripled the cost of writing
# (and of reading back) for no gain in size.
TEXT_COLUMNS = ["clip_id", "source", "label", "split"]
PARQUET_WRITE_OPTIONS = {"compression": "zstd", "use_dictionary": TEXT_COLUMNS, "write_statistics": TEXT_COLUMNS}


def segment_schema(n_mels: int) -> pa.Schema:
    return pa.schema(
        [
            ("clip_id", pa.string()),
            ("source", pa.string()),
            ("segment_index", pa.int32()),
            ("offset_s", pa.float64()),
            ("duration_s", pa.float64()),
            ("num_frames", pa.int32()),
            ("mel", pa.large_binary()),  # float16 (num_frames, n_mels), C order: see above
            ("mel_bin_sum", pa.list_(pa.float64(), n_mels)),
            ("mel_bin_sq_sum", pa.list_(pa.float64(), n_mels)),
            ("label", pa.string()),
            ("split", pa.string()),
        ]
    )


def make_clip_id(source: str, segment_index: int) -> str:
    """Stable id of one segment: a short hash of its source plus the segment number."""
    return f"{hashlib.sha1(source.encode()).hexdigest()[:16]}-{segment_index:05d}"


def segments_to_table(rows: Sequence[tuple[str, str | None, str | None, Segment]], n_mels: int) -> pa.Table:
    """Rows of (source, label, split, segment) -> a table in the shard schema."""
    mels16 = [segment.mel.astype(np.float16) for _, _, _, segment in rows]  # each (frames, n_mels)
    frames = np.array([len(mel) for mel in mels16], dtype=np.int32)
    offsets = np.concatenate([[0], np.cumsum(frames)]).astype(np.int32)
    flat = np.concatenate([mel.reshape(-1) for mel in mels16]) if rows else np.zeros(0, np.float16)
    byte_offsets = pa.array(offsets.astype(np.int64) * n_mels * 2)  # 2 bytes per float16 value
    mel_column = pa.LargeBinaryArray.from_buffers(
        pa.large_binary(), len(rows), [None, byte_offsets.buffers()[1], pa.py_buffer(flat.astype("<f2").tobytes())]
    )
    # Sums of the stored (float16-rounded) values; float32 squares are exact enough per row, the
    # float64 accumulation keeps the dataset totals exact.
    as32 = [mel.astype(np.float32) for mel in mels16]
    bin_sum = np.stack([m.sum(axis=0, dtype=np.float64) for m in as32]) if rows else np.zeros((0, n_mels))
    bin_sq_sum = np.stack([np.square(m).sum(axis=0, dtype=np.float64) for m in as32]) if rows else np.zeros((0, n_mels))
    columns = {
        "clip_id": [make_clip_id(source, segment.index) for source, _, _, segment in rows],
        "source": [source for source, _, _, _ in rows],
        "segment_index": [segment.index for _, _, _, segment in rows],
        "offset_s": [segment.offset_s for _, _, _, segment in rows],
        "duration_s": [segment.duration_s for _, _, _, segment in rows],
        "num_frames": frames,
        "mel": mel_column,
        "mel_bin_sum": pa.FixedSizeListArray.from_arrays(pa.array(bin_sum.reshape(-1)), n_mels),
        "mel_bin_sq_sum": pa.FixedSizeListArray.from_arrays(pa.array(bin_sq_sum.reshape(-1)), n_mels),
        "label": [label for _, label, _, _ in rows],
        "split": [split for _, _, split, _ in rows],
    }
    schema = segment_schema(n_mels)
    return pa.table([pa.array(columns[field.name], type=field.type) for field in schema], schema=schema)


def part_files(shard_dir: str | Path) -> list[Path] | list[str]:
    """The part files, sorted, in the form `shard_dir` was given: Paths in a local folder, URIs
    (same scheme and options) for a URI."""
    location = locate_shards(shard_dir)
    return [location.as_given(name) for name in location.file_names(PART_GLOB)]


def read_manifest(shard_dir: str | Path) -> dict:
    """The shard directory's manifest.json as a dict; `shard_dir` is a local path or a URI."""
    text = locate_shards(shard_dir).read_text(MANIFEST_NAME)
    if text is None:
        raise FileNotFoundError(
            f"{shard_dir} is not a finished shard directory (no {MANIFEST_NAME}); "
            "make one with: python -m pipeline.prep --input AUDIO_DIR --output DIR"
            + (" and copy the whole directory there" if is_uri(shard_dir) else "")
        )
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        raise ShardIntegrityError(
            f"{locate_shards(shard_dir).as_given(MANIFEST_NAME)} is damaged (not valid JSON: {error}); re-run prep "
            "into a new folder or with --overwrite"
        ) from None


def checked_part_names(shard_dir: str | Path, manifest: dict | None = None) -> list[str]:
    """The part files a reader may read: the manifest's list, each checked to be there unchanged
    (`pipeline.shards.integrity`); raises `ShardIntegrityError` naming what is missing or changed."""
    manifest = read_manifest(shard_dir) if manifest is None else manifest
    return verified_part_names(locate_shards(shard_dir), manifest)


def read_rejected(shard_dir: str | Path) -> list[dict]:
    text = locate_shards(shard_dir).read_text(REJECTED_NAME)
    if text is None:
        return []
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def read_shard_table(shard_dir: str | Path, columns: list[str] | None = None) -> pa.Table:
    """All rows of a shard directory (local path or URI) as one pyarrow Table (plain pyarrow, no Ray).

    A finished directory's part files are checked against its manifest first; one without a manifest
    yet (prep computing its statistics) is read as it stands."""
    location = locate_shards(shard_dir)
    if location.read_text(MANIFEST_NAME) is None:
        names = location.file_names(PART_GLOB)
    else:
        names = checked_part_names(shard_dir)
    if not names:
        manifest = read_manifest(shard_dir)
        raise ValueError(
            f"{shard_dir} has no part-*.parquet files ({manifest.get('num_rows', 0)} rows; "
            f"see {REJECTED_NAME} for why every input was rejected)"
        )
    return pa.concat_tables(
        [pq.read_table(location.child_path(name), columns=columns, filesystem=location.filesystem) for name in names]
    )


def mel_from_row(row) -> np.ndarray:
    """float32 (frames, n_mels) from one row as pyarrow `to_pylist`, pandas or Ray give it."""
    mel = row["mel"]
    if isinstance(mel, (bytes, bytearray, memoryview)):  # format 2: raw float16 bytes
        values = np.frombuffer(mel, dtype="<f2")
        frames = int(row["num_frames"])
        return values.reshape(frames, len(values) // max(1, frames)).astype(np.float32)
    if isinstance(mel, np.ndarray) and mel.dtype == object:
        mel = np.stack([np.asarray(frame) for frame in mel]) if len(mel) else np.zeros((0, 0))
    return np.asarray(mel, dtype=np.float32)


def flat_mels(mel_column: pa.ChunkedArray | pa.Array, n_mels: int) -> tuple[np.ndarray, np.ndarray]:
    """(float16 (total_frames, n_mels) of every row's frames back to back, int64 (rows + 1,) frame offsets):
    row i is frames [offsets[i], offsets[i + 1]). Zero-copy for format-2 columns."""
    if isinstance(mel_column, pa.ChunkedArray):
        mel_column = mel_column.combine_chunks() if mel_column.num_chunks != 1 else mel_column.chunk(0)
    if pa.types.is_large_binary(mel_column.type) or pa.types.is_binary(mel_column.type):
        offset_type = np.int64 if pa.types.is_large_binary(mel_column.type) else np.int32
        _, offsets_buffer, data_buffer = mel_column.buffers()
        byte_offsets = np.frombuffer(offsets_buffer, offset_type)[
            mel_column.offset : mel_column.offset + len(mel_column) + 1
        ]
        values = np.frombuffer(data_buffer, "<f2") if data_buffer is not None else np.zeros(0, np.float16)
        start = int(byte_offsets[0]) // 2 if len(byte_offsets) else 0
        frame_offsets = (byte_offsets.astype(np.int64) - 2 * start) // (2 * n_mels)
        flat = values[start : start + int(frame_offsets[-1]) * n_mels] if len(byte_offsets) else values[:0]
        return flat.reshape(-1, n_mels), frame_offsets
    # Format 1: list<fixed_size_list<float16, n_mels>>.
    flat = pc.list_flatten(pc.list_flatten(mel_column)).to_numpy(zero_copy_only=False)
    frames = pc.list_value_length(mel_column).to_numpy(zero_copy_only=False)
    return flat.reshape(-1, n_mels), np.concatenate([[0], np.cumsum(frames, dtype=np.int64)])


def mel_matrices(mel_column: pa.ChunkedArray | pa.Array, n_mels: int) -> list[np.ndarray]:
    """Every row's float16 (frames, n_mels) matrix from a `mel` column, as views of one buffer."""
    flat, offsets = flat_mels(mel_column, n_mels)
    return [flat[start:end] for start, end in itertools.pairwise(offsets)]
