"""A CSV/JSONL manifest of prep inputs, on this machine or in a bucket.

Each row has `path` and optional `label` / `split`. A path is a local file (absolute, or relative to
the manifest's folder), a bucket URI (`s3://BUCKET/KEY`; without options it takes the manifest's own,
so one `?endpoint_override=...` serves both), or, in a manifest in a bucket, a key relative to the
manifest's prefix. A `.tar` path stands for each audio member of that WebDataset shard. The source name
an input keeps is its path exactly as the manifest wrote it (a URI without its options).

A file named twice (`clip0.wav`, `./clip0.wav`, its absolute path, a link to it) is one input: entries
are compared by their resolved path (or URI), and every later one is a "duplicate entry".
"""

from __future__ import annotations

import csv
import io
import json
import os
from pathlib import Path

import pyarrow.fs as pafs

from pipeline.audio.bucket_inputs import object_uri, parent_uri, read_object_text, stat_objects, with_options_of
from pipeline.audio.input_file import DUPLICATE_KIND, InputFile, InputListing, InputListingError, stat_local_input
from pipeline.audio.tar_shards import is_tar_shard, tar_shard_inputs
from pipeline.storage.bucket_check import without_query
from pipeline.storage.uri import is_uri

LABEL_FIELDS = ("label", "split")


def _records(text: str, named: str, *, csv_format: bool) -> list[dict]:
    if csv_format:
        return list(csv.DictReader(io.StringIO(text, newline="")))
    records = []
    for line_number, line in enumerate(text.splitlines(), start=1):
        if line.strip():
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError as error:
                raise InputListingError(f"{named}:{line_number}: not valid JSON ({error.msg})") from None
    return records


def _target(source: str, manifest: str) -> str:
    """Where an entry's bytes are: a URI, or an absolute local path."""
    if is_uri(source):
        return with_options_of(source, manifest) if is_uri(manifest) else source
    path = Path(source).expanduser()
    if path.is_absolute():
        return str(path)
    if is_uri(manifest):
        return object_uri(parent_uri(manifest), source)
    return str(Path(manifest).parent / path)


def read_input_manifest(manifest: str | Path) -> InputListing:
    """The inputs a manifest (a local path or a URI) lists, in its order; see the module docstring."""
    manifest = str(manifest)
    named = without_query(manifest)
    text = read_object_text(manifest) if is_uri(manifest) else Path(manifest).read_text(encoding="utf-8")
    records = _records(text, named, csv_format=named.lower().endswith(".csv"))
    if records and "path" not in records[0]:
        raise InputListingError(f"{named}: needs a 'path' column/key; found {sorted(records[0])}")
    entries, first_entry_of, duplicates = [], {}, {}
    for line_number, record in enumerate(records, start=1):
        source = str(record.get("path") or "").strip()
        if not source:
            raise InputListingError(f"{named}: entry {line_number} has an empty 'path'")
        fields = {key: (str(record[key]) if record.get(key) not in (None, "") else None) for key in LABEL_FIELDS}
        target = _target(source, manifest)
        same = without_query(target) if is_uri(target) else os.path.realpath(target)
        shown_source = without_query(source) if is_uri(source) else source
        if same in first_entry_of:
            first_line, first_source = first_entry_of[same]
            named_first = "" if first_source == shown_source else f" ({first_source!r}, the same file)"
            duplicates[len(entries)] = f"duplicate of entry {first_line}{named_first}"
        else:
            first_entry_of[same] = (line_number, shown_source)
        entries.append((shown_source, target, fields))
    return _stat_entries(entries, duplicates)


def _stat_entries(entries: list[tuple[str, str, dict]], duplicates: dict[int, str]) -> InputListing:
    """Each entry as an input (a tar as its members), the URIs looked up together in threads."""
    uri_positions = [i for i, (_, target, _) in enumerate(entries) if is_uri(target) and i not in duplicates]
    infos = dict(zip(uri_positions, stat_objects([entries[i][1] for i in uri_positions])))
    listing = InputListing(inputs=[])
    for position, (source, target, fields) in enumerate(entries):
        if position in duplicates:
            listing.inputs.append(InputFile(path=target, source=source, problem=duplicates[position],
                                            problem_kind=DUPLICATE_KIND, **fields))  # fmt: skip
        elif is_tar_shard(source):
            listing.extend(tar_shard_inputs(target, source))
        elif is_uri(target):
            listing.inputs.append(_object_input(target, source, infos[position], fields))
        else:
            listing.inputs.append(stat_local_input(Path(target), source, **fields))
    return listing


def _object_input(uri: str, source: str, info: pafs.FileInfo | Exception, fields: dict) -> InputFile:
    if isinstance(info, Exception):
        reason = f"cannot look it up in the store ({' '.join(str(info).split())[:200]})"
        return InputFile(path=uri, source=source, problem=reason, problem_kind="unreadable", **fields)
    if info.type == pafs.FileType.NotFound:
        return InputFile(path=uri, source=source, problem=f"missing object: {without_query(uri)}",
                         problem_kind="missing file", **fields)  # fmt: skip
    if info.type != pafs.FileType.File:
        return InputFile(
            path=uri, source=source, problem="not an object (a prefix)", problem_kind="not a file", **fields
        )
    return InputFile(path=uri, source=source, size_bytes=info.size, mtime_ns=int(info.mtime_ns or 0), **fields)
