"""Listing prep inputs, and seeded nested subsets of them.

`--input` is a folder (walked recursively), a bucket prefix (`s3://BUCKET/PATH?...`, listed
recursively), a CSV/JSONL manifest on disk or in a bucket (`pipeline.audio.input_manifest`), or a
WebDataset `.tar` shard; a `.tar` met in a folder, a prefix or a manifest stands for each audio member
of it (`pipeline.audio.tar_shards`). Every input is an `InputFile` (`pipeline.audio.input_file`) whose
`source` is the name it keeps in the shards: the path below the input folder or prefix, the path
exactly as a manifest wrote it, or `SHARD/MEMBER` for a tar member. Inputs that cannot even be listed
(missing, a broken link, a duplicate manifest line, a damaged shard) are still returned, with a
`problem`, so prep puts them in rejected.jsonl instead of dropping them.
"""

from __future__ import annotations

import hashlib
import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pyarrow.fs as pafs
import soundfile

from pipeline.audio.bucket_inputs import kind_of, list_prefix, object_uri
from pipeline.audio.input_bytes import HEADER_BLOCK_BYTES, open_input_bytes
from pipeline.audio.input_file import (
    DUPLICATE_KIND,
    MANIFEST_EXTENSIONS,
    NOT_UTF8_KIND,
    UNREADABLE_FOLDER_KIND,
    InputFile,
    InputListing,
    InputListingError,
    is_audio_name,
    printable_name,
    stat_local_input,
    utf8_name,
)
from pipeline.audio.input_manifest import read_input_manifest
from pipeline.audio.tar_shards import is_tar_shard, tar_shard_inputs
from pipeline.storage.bucket_check import without_query
from pipeline.storage.uri import is_uri

EXPECTED = "a folder or bucket prefix of audio, a manifest ending in .csv or .jsonl, or a WebDataset .tar shard"


def list_inputs(input_path: str | Path) -> InputListing:
    """Inputs from a folder, a bucket prefix, a manifest or a tar shard; see the module docstring."""
    if is_uri(input_path):
        return _list_uri(str(input_path))
    input_path = Path(input_path).expanduser()
    if input_path.is_dir():
        return walk_audio_directory(input_path)
    if input_path.is_file() and input_path.suffix.lower() in MANIFEST_EXTENSIONS:
        return read_input_manifest(input_path)
    if input_path.is_file() and is_tar_shard(input_path.name):
        return tar_shard_inputs(str(input_path.absolute()), input_path.name)
    if input_path.is_file():
        raise InputListingError(f"--input {input_path}: expected {EXPECTED}")
    raise InputListingError(f"--input {input_path} does not exist")


def _list_uri(uri: str) -> InputListing:
    name = without_query(uri).rstrip("/").rpartition("/")[2]
    kind = kind_of(uri)
    if kind == pafs.FileType.Directory:
        return list_bucket_prefix(uri)
    if kind == pafs.FileType.File and Path(name).suffix.lower() in MANIFEST_EXTENSIONS:
        return read_input_manifest(uri)
    if kind == pafs.FileType.File and is_tar_shard(name):
        return tar_shard_inputs(uri, name)
    if kind == pafs.FileType.File:
        raise InputListingError(f"--input {without_query(uri)}: expected {EXPECTED}")
    raise InputListingError(
        f"--input {without_query(uri)} does not exist (no object, and no objects under it as a prefix); check the path"
    )


def list_bucket_prefix(uri: str) -> InputListing:
    """Every audio object (and tar shard's members) under a bucket prefix, by key."""
    listing = InputListing(inputs=[])
    for key, info in list_prefix(uri):
        if is_tar_shard(key):
            listing.extend(tar_shard_inputs(object_uri(uri, key), key))
        elif is_audio_name(key):
            listing.inputs.append(
                InputFile(path=object_uri(uri, key), source=key, size_bytes=info.size, mtime_ns=int(info.mtime_ns or 0))
            )
        else:
            listing.skipped_non_audio += 1
    return listing


def walk_audio_directory(root: Path) -> InputListing:
    """All audio files under `root`, following folder links but visiting each real folder (and file) once."""
    root = root.absolute()
    listing = InputListing(inputs=[])
    visited_folders: set[tuple[int, int]] = set()
    first_source_of: dict[str, str] = {}  # resolved path -> the source it was first listed as

    def unreadable_folder(error: OSError) -> None:
        # os.walk skips a folder it cannot list without a word: the audio under it would be lost silently.
        folder = Path(error.filename)
        source = folder.relative_to(root).as_posix() + "/" if folder != root else "./"
        listing.inputs.append(
            InputFile(
                path=str(folder),
                source=source,
                problem_kind=UNREADABLE_FOLDER_KIND,
                problem=f"folder cannot be listed ({error.strerror}); nothing under it was read: "
                "give this user read and execute permission on it (chmod a+rx), or run as its owner",
            )
        )

    for folder, subfolders, files in os.walk(root, followlinks=True, onerror=unreadable_folder):
        stat = os.stat(folder)
        if (stat.st_dev, stat.st_ino) in visited_folders:
            # A link back to a folder already walked (a loop, or a second name for it).
            listing.skipped_symlink_loops.append(os.path.relpath(folder, root))
            subfolders.clear()
            continue
        visited_folders.add((stat.st_dev, stat.st_ino))
        subfolders.sort()
        for name in sorted(files):
            path = Path(folder) / name
            if is_tar_shard(name):
                source = path.relative_to(root).as_posix()
                shard = (
                    tar_shard_inputs(str(path), source)
                    if utf8_name(source)
                    else InputListing(inputs=[_not_utf8(path, source)])
                )
                listing.extend(shard)
                continue
            if not is_audio_name(name):
                listing.skipped_non_audio += 1
                continue
            source, same_file = path.relative_to(root).as_posix(), os.path.realpath(path)
            if same_file in first_source_of:  # a file link to an audio file already listed
                listing.inputs.append(
                    InputFile(
                        path=str(path),
                        source=source,
                        problem_kind=DUPLICATE_KIND,
                        problem=f"duplicate of {first_source_of[same_file]!r}, the same file",
                    )
                )
                continue
            first_source_of[same_file] = source
            listing.inputs.append(stat_local_input(path, source) if utf8_name(str(path)) else _not_utf8(path, source))
    return listing


def _not_utf8(path: Path, source: str) -> InputFile:
    """Rejected with its name, as every other bad input is, instead of failing the whole run."""
    return InputFile(
        path=printable_name(str(path)),
        source=printable_name(source),
        problem_kind=NOT_UTF8_KIND,
        problem="the file name is not valid UTF-8; rename it (e.g. `convmv -f latin1 -t utf8 --notest FILE`)",
    )


def audio_info(item: InputFile):
    """The audio header of an input (`soundfile.info`), read through the store for an object or a tar
    member (only the header's bytes); raises what the decoder or the store raises."""
    if item.location.is_local_file:
        return soundfile.info(item.path)
    with open_input_bytes(item.location, block_bytes=HEADER_BLOCK_BYTES) as stream:
        return soundfile.info(stream)


def audio_duration_s(item: InputFile) -> float:
    """Duration from the file header; 0 for files that cannot be opened (prep rejects them later)."""
    try:
        info = audio_info(item)
        return info.frames / info.samplerate if info.samplerate else 0.0
    except Exception:  # noqa: BLE001 - any failure here is reported when prep decodes the file
        return 0.0


def seeded_order(inputs: list[InputFile], seed: int) -> list[InputFile]:
    """A seeded shuffle keyed on each source's hash: stable when other files are added or removed."""
    return sorted(inputs, key=lambda item: hashlib.sha256(f"{seed}\0{item.source}".encode()).hexdigest())


def select_subset_hours(
    inputs: list[InputFile], *, max_hours: float, seed: int, io_threads: int = 16
) -> list[InputFile]:
    """About `max_hours` of audio: the shortest prefix of the seeded order that reaches it.

    Because every H takes a prefix of the same order, the subsets are nested: the 1 h subset is
    inside the 2 h subset. Unreadable inputs count 0 hours and stay in (they are rejected later).
    """
    if max_hours <= 0:
        raise InputListingError(f"--max-hours must be positive, got {max_hours}")
    ordered = seeded_order(inputs, seed)
    budget_s, selected, total_s = max_hours * 3600.0, [], 0.0
    with ThreadPoolExecutor(io_threads) as pool:
        # Durations come from headers only; threads hide file-system latency on large corpora.
        durations = pool.map(lambda item: 0.0 if item.problem else audio_duration_s(item), ordered)
        for item, duration_s in zip(ordered, durations):
            if total_s >= budget_s:
                break
            selected.append(item)
            total_s += duration_s
    return selected
