"""The manifest's list of part files, and checking a shard folder against it before reading.

Prep records every part file in `manifest.json["part_files"]` as {"name", "rows", "bytes", "sha256"};
readers take the part files from that list, never from a glob, after checking that each is there
with its size and sha256 and that no unlisted part sits beside them. Otherwise a folder with a
third of its parts deleted, or a part from a second prep run, trains "normally" while MLflow
records the manifest's rows, hours and fingerprint as if the data were the one prep made.

Why a full sha256 and not only sizes: a size check misses an overwritten byte, and sha256 costs
~0.1 s per 100 MB on one core (SHA-NI; measured on the dev machine), so the default shard set
(~100 MB) is checked in about that. Each file is hashed once per process (memoised on its path,
size and mtime), so the driver and each worker pay it once, not once per reader call.
"""

from __future__ import annotations

import hashlib

import pyarrow.fs as pafs
import pyarrow.parquet as pq

from pipeline.shards.location import ShardLocation

PART_GLOB = "part-*.parquet"  # the part files prep writes; re-exported by pipeline.shards.format
_HASHED: dict[tuple[str, int, int | None], str] = {}  # (path, bytes, mtime_ns) -> sha256
_CHUNK_BYTES = 8 * 1024 * 1024


class ShardIntegrityError(ValueError):
    """A shard folder whose part files differ from what its manifest lists."""


def _sha256(location: ShardLocation, name: str, info: pafs.FileInfo) -> str:
    key = (location.child_path(name), info.size, info.mtime_ns)
    if key not in _HASHED:
        digest = hashlib.sha256()
        with location.filesystem.open_input_stream(location.child_path(name)) as stream:
            while chunk := stream.read(_CHUNK_BYTES):
                digest.update(chunk)
        _HASHED[key] = digest.hexdigest()
    return _HASHED[key]


def _infos(location: ShardLocation, pattern_names: list[str] | None = None) -> dict[str, pafs.FileInfo]:
    """name -> FileInfo of the part files in the folder (or of `pattern_names` only)."""
    names = location.file_names(PART_GLOB) if pattern_names is None else pattern_names
    infos = location.filesystem.get_file_info([location.child_path(name) for name in names])
    return {name: info for name, info in zip(names, infos) if info.type == pafs.FileType.File}


def describe_part_files(location: ShardLocation) -> list[dict]:
    """The manifest's `part_files` records of every part file in the folder, sorted by name."""
    records = []
    for name, info in _infos(location).items():
        rows = pq.read_metadata(location.child_path(name), filesystem=location.filesystem).num_rows
        records.append({"name": name, "rows": rows, "bytes": info.size, "sha256": _sha256(location, name, info)})
    return records


def rerun_advice(location: ShardLocation, manifest: dict) -> str:
    """The prep command that makes this folder again (from what the manifest recorded)."""
    settings = manifest.get("settings", {})
    command = (
        f"python -m pipeline.prep --input {manifest.get('input', 'AUDIO')} --output {location.given} "
        f"--preset {settings.get('preset', 'audiomae')} --segment-s {settings.get('segment_s', 10.0)}"
    )
    if settings.get("max_hours") is not None:
        command += f" --max-hours {settings['max_hours']} --seed {settings.get('seed', 0)}"
    return f"re-run prep into a new folder, or with --overwrite: {command} --overwrite"


def part_file_problems(location: ShardLocation, manifest: dict) -> list[str]:
    """What differs between the folder's part files and the manifest's list (empty: they agree)."""
    records = manifest.get("part_files")
    if records is None or any(not isinstance(record, dict) for record in records):
        return [f"its manifest.json (prep {manifest.get('audioscale_version', '?')}) lists no part-file checksums"]
    found = _infos(location)
    problems = [
        f"{name} is not listed in manifest.json (left by another prep run into the same folder?)"
        for name in sorted(set(found) - {record["name"] for record in records})
    ]
    for record in records:
        name, info = record["name"], found.get(record["name"])
        if info is None:
            problems.append(f"{name} is missing ({record['rows']} rows)")
        elif info.size != record["bytes"]:
            problems.append(
                f"{name} is {info.size} bytes, manifest.json says {record['bytes']} (truncated or replaced)"
            )
        elif _sha256(location, name, info) != record["sha256"]:
            problems.append(f"{name} differs from its sha256 in manifest.json (changed after prep)")
    return problems


def verified_part_names(location: ShardLocation, manifest: dict) -> list[str]:
    """The manifest's part-file names, after checking the folder against them; raises
    `ShardIntegrityError` naming every missing, changed or unlisted part file and what to do."""
    problems = part_file_problems(location, manifest)
    if problems:
        shown = "; ".join(problems[:5]) + (f"; and {len(problems) - 5} more" if len(problems) > 5 else "")
        raise ShardIntegrityError(
            f"shards {location.given} do not match their manifest.json: {shown}. Training on them would "
            f"record rows and hours it did not read; {rerun_advice(location, manifest)}"
        )
    return [record["name"] for record in manifest["part_files"]]
