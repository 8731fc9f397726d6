"""A prep run's progress, kept in its output folder so that a run killed at any point continues.

The work items (files, or time ranges of long files: `pipeline.prep.ranges`) are cut into batches of
consecutive items; batch b, whose first item is item i, is written by one task as the part file
`part-{i:09d}.parquet` (names sort in item order, so rows read back in the order of an uninterrupted
run), then recorded as `.prep-progress/batch-{i:09d}.json`: the part's name, rows, bytes and sha256
and what became of each of its items. The record is written after the part, so a record means a whole
part. `plan.json` holds the run's fingerprint and batch size: a second run with the same inputs and
settings (the same fingerprint) reads the records, deletes parts no record names (a task killed
mid-write), and featurizes only the batches left, cut exactly as before. The folder goes once
the manifest is written.

On a disk every file is written under a temporary name and renamed; in a bucket a PUT is atomic. A
store that fails a write is retried with backoff before the batch's task gives up.
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import time
import uuid
from collections.abc import Callable

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from pipeline.shards.format import PARQUET_WRITE_OPTIONS, PART_GLOB, segment_schema
from pipeline.shards.location import ShardLocation

PROGRESS_DIR = ".prep-progress"
PLAN_NAME = "plan.json"
WRITE_ATTEMPTS = 5  # backoff 1, 2, 4, 8 s between them: a store that blinks for ~15 s loses nothing


def part_name(first_item: int) -> str:
    return f"part-{first_item:09d}.parquet"


def _record_name(first_item: int) -> str:
    return f"batch-{first_item:09d}.json"


def _progress_path(location: ShardLocation, name: str = "") -> str:
    return location.child_path(f"{PROGRESS_DIR}/{name}".rstrip("/"))


def with_retries(write: Callable[[], None], *, attempts: int = WRITE_ATTEMPTS, say=print) -> None:
    """Run `write`; on an OSError (the store failed it), wait 1, 2, 4, ... s and try again."""
    for attempt in range(attempts):
        try:
            write()
            return
        except OSError as error:
            if attempt == attempts - 1:
                raise
            say(f"prep: a write failed ({' '.join(str(error).split())[:160]}); retrying in {2**attempt} s")
            time.sleep(2**attempt)


def _put(location: ShardLocation, path: str, data: bytes) -> None:
    """`data` at `path`, whole or not at all."""
    filesystem = location.filesystem
    if not isinstance(filesystem, pafs.LocalFileSystem):
        with filesystem.open_output_stream(path) as stream:  # one PUT: atomic
            stream.write(data)
        return
    temporary = _progress_path(location, f"tmp-{uuid.uuid4().hex}")
    filesystem.create_dir(_progress_path(location), recursive=True)
    with filesystem.open_output_stream(temporary) as stream:
        stream.write(data)
    filesystem.move(temporary, path)


def write_part(location: ShardLocation, first_item: int, tables: list[pa.Table], n_mels: int) -> dict | None:
    """The batch's rows as one part file (row groups as the tables come); its manifest record, or
    None when the batch made no rows."""
    if not tables:
        return None
    buffer = pa.BufferOutputStream()
    with pq.ParquetWriter(buffer, segment_schema(n_mels), **PARQUET_WRITE_OPTIONS) as writer:
        for table in tables:
            writer.write_table(table)
    data = buffer.getvalue().to_pybytes()
    name = part_name(first_item)
    with_retries(lambda: _put(location, location.child_path(name), data))
    rows = sum(table.num_rows for table in tables)
    return {"name": name, "rows": rows, "bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}


def write_record(location: ShardLocation, record: dict) -> None:
    data = json.dumps(record, ensure_ascii=True).encode()
    with_retries(lambda: _put(location, _progress_path(location, _record_name(record["first_item"])), data))


def read_plan(location: ShardLocation) -> dict | None:
    text = _read_text(location, _progress_path(location, PLAN_NAME))
    try:
        return json.loads(text) if text is not None else None
    except json.JSONDecodeError:
        return None


def start_plan(location: ShardLocation, plan: dict) -> None:
    with_retries(lambda: _put(location, _progress_path(location, PLAN_NAME), json.dumps(plan).encode()))


def _read_text(location: ShardLocation, path: str) -> str | None:
    if location.filesystem.get_file_info(path).type != pafs.FileType.File:
        return None
    with location.filesystem.open_input_stream(path) as stream:
        return stream.read().decode("utf-8")


def finished_records(location: ShardLocation) -> dict[int, dict]:
    """first item -> record of every batch recorded whole: its part there with the recorded size."""
    selector = pafs.FileSelector(_progress_path(location), allow_not_found=True)
    records = {}
    for info in location.filesystem.get_file_info(selector):
        if not fnmatch.fnmatchcase(info.base_name, "batch-*.json"):
            continue
        try:
            record = json.loads(_read_text(location, info.path) or "")
        except json.JSONDecodeError:
            continue  # cut short: the batch is done again
        records[int(record["first_item"])] = record
    parts = [record["part"] for record in records.values() if record.get("part")]
    sizes = location.filesystem.get_file_info([location.child_path(part["name"]) for part in parts])
    missing = {part["name"] for part, info in zip(parts, sizes) if info.size != part["bytes"]}
    return {first: record for first, record in records.items() if (record.get("part") or {}).get("name") not in missing}


def remove_unrecorded_parts(location: ShardLocation, records: dict[int, dict]) -> list[str]:
    """Delete the part files no record names (written by a task that was killed before its record)."""
    kept = {record["part"]["name"] for record in records.values() if record.get("part")}
    removed = [name for name in location.file_names(PART_GLOB) if name not in kept]
    for name in removed:
        location.filesystem.delete_file(location.child_path(name))
    return removed


def clear_progress(location: ShardLocation) -> None:
    if location.filesystem.get_file_info(_progress_path(location)).type == pafs.FileType.Directory:
        location.filesystem.delete_dir(_progress_path(location))
