"""Listing prep inputs: a directory walk or a CSV/JSONL manifest, and seeded nested subsets.

Every input is an `InputFile` whose `source` is the name it keeps in the shards (the path relative
to the input directory, or the path exactly as the manifest wrote it). Inputs that cannot even be
listed as files (missing, broken link, duplicate manifest line) are still returned, with a
`problem`, so the prep stage can put them in rejected.jsonl instead of dropping them.
"""

from __future__ import annotations

import csv
import dataclasses
import hashlib
import json
import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import soundfile

# What a directory walk picks up; every other file is counted as skipped in the summary.
AUDIO_EXTENSIONS = frozenset({".wav", ".flac", ".ogg", ".oga", ".mp3", ".aif", ".aiff", ".au", ".w64", ".opus"})
MANIFEST_EXTENSIONS = frozenset({".csv", ".jsonl"})
DUPLICATE_KIND = "duplicate entry"  # the problem_kind of a second name for an input already listed
UNREADABLE_FOLDER_KIND = "unreadable folder"  # the problem_kind of a folder the walk could not list


class InputListingError(ValueError):
    """The --input (or a setting about it) is unusable as given; the message says how to fix it."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class InputFile:
    path: str  # absolute path to open
    source: str  # name recorded in the shards and in rejected.jsonl
    label: str | None = None
    split: str | None = None
    size_bytes: int = 0
    mtime_ns: int = 0
    problem: str | None = None  # set when the file cannot be opened at all; the input is rejected
    problem_kind: str | None = None


@dataclasses.dataclass(kw_only=True)
class InputListing:
    inputs: list[InputFile]
    skipped_non_audio: int = 0  # directory files without an audio extension
    skipped_symlink_loops: list[str] = dataclasses.field(default_factory=list)  # folders seen twice


def list_inputs(input_path: str | Path) -> InputListing:
    """Inputs from a directory (recursive, audio extensions) or a .csv/.jsonl manifest."""
    input_path = Path(input_path).expanduser()
    if input_path.is_dir():
        return walk_audio_directory(input_path)
    if input_path.is_file() and input_path.suffix.lower() in MANIFEST_EXTENSIONS:
        return InputListing(inputs=read_input_manifest(input_path))
    if input_path.is_file():
        raise InputListingError(
            f"--input {input_path}: expected a directory of audio or a manifest ending in .csv or .jsonl"
        )
    raise InputListingError(f"--input {input_path} does not exist")


def _stat_input(path: Path, source: str, **fields) -> InputFile:
    try:
        stat = path.stat()  # follows links: a broken or looping link fails here
    except FileNotFoundError:
        kind = "broken symlink" if path.is_symlink() else "missing file"
        return InputFile(path=str(path), source=source, problem=f"{kind}: {path}", problem_kind=kind, **fields)
    except OSError as error:
        return InputFile(
            path=str(path),
            source=source,
            problem=f"cannot stat ({error.strerror})",
            problem_kind="unreadable",
            **fields,
        )
    if not path.is_file():
        return InputFile(
            path=str(path), source=source, problem="not a regular file", problem_kind="not a file", **fields
        )
    return InputFile(
        path=str(path.absolute()), source=source, size_bytes=stat.st_size, mtime_ns=stat.st_mtime_ns, **fields
    )


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
            if path.suffix.lower() not in AUDIO_EXTENSIONS:
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
            listing.inputs.append(_stat_input(path, source) if utf8_name(str(path)) else _not_utf8(path, source))
    return listing


NOT_UTF8_KIND = "file name not UTF-8"


def utf8_name(text: str) -> bool:
    """False for a name the OS gave as bytes that are not UTF-8 (Python keeps them as surrogates):
    Arrow, Parquet and JSON hold only valid UTF-8 text."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def printable_name(text: str) -> str:
    """A name with its undecodable bytes written as \\xNN, e.g. caf\\xe9.wav: safe to print and store."""
    return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def _not_utf8(path: Path, source: str) -> InputFile:
    """Rejected with its name, as every other bad input is, instead of failing the whole run."""
    return InputFile(
        path=printable_name(str(path)),
        source=printable_name(source),
        problem_kind=NOT_UTF8_KIND,
        problem="the file name is not valid UTF-8; rename it (e.g. `convmv -f latin1 -t utf8 --notest FILE`)",
    )


def _manifest_records(manifest: Path) -> list[dict]:
    if manifest.suffix.lower() == ".csv":
        with manifest.open(newline="", encoding="utf-8") as handle:
            return list(csv.DictReader(handle))
    records = []
    for line_number, line in enumerate(manifest.read_text(encoding="utf-8").splitlines(), start=1):
        if line.strip():
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError as error:
                raise InputListingError(f"{manifest}:{line_number}: not valid JSON ({error.msg})") from None
    return records


def read_input_manifest(manifest: Path) -> list[InputFile]:
    """Rows with `path` (relative paths are relative to the manifest's folder), optional label/split.

    A file named twice (`clip0.wav`, `./clip0.wav`, its absolute path, a link to it) is one input:
    entries are compared by their resolved path, and every later one is a "duplicate entry"."""
    records = _manifest_records(manifest)
    if records and "path" not in records[0]:
        raise InputListingError(f"{manifest}: needs a 'path' column/key; found {sorted(records[0])}")
    inputs, first_entry_of = [], {}
    for line_number, record in enumerate(records, start=1):
        source = str(record.get("path") or "").strip()
        if not source:
            raise InputListingError(f"{manifest}: entry {line_number} has an empty 'path'")
        fields = {key: (str(record[key]) if record.get(key) not in (None, "") else None) for key in ("label", "split")}
        path = Path(source).expanduser()
        path = path if path.is_absolute() else manifest.parent / path
        same_file = os.path.realpath(path)
        if same_file in first_entry_of:
            first_line, first_source = first_entry_of[same_file]
            named = "" if first_source == source else f" ({first_source!r}, the same file)"
            inputs.append(
                InputFile(
                    path=str(path),
                    source=source,
                    problem=f"duplicate of entry {first_line}{named}",
                    problem_kind=DUPLICATE_KIND,
                    **fields,
                )
            )
            continue
        first_entry_of[same_file] = (line_number, source)
        inputs.append(_stat_input(path, source, **fields))
    return inputs


def audio_duration_s(path: str) -> float:
    """Duration from the file header; 0 for files that cannot be opened (prep rejects them later)."""
    try:
        info = soundfile.info(path)
        return info.frames / info.samplerate if info.samplerate else 0.0
    except Exception:  # noqa: BLE001 - any failure here is reported when prep decodes the file
        return 0.0


def seeded_order(inputs: list[InputFile], seed: int) -> list[InputFile]:
    """A seeded shuffle keyed on each source's hash: stable when other files are added or removed."""
    return sorted(inputs, key=lambda item: hashlib.sha256(f"{seed}\0{item.source}".encode()).hexdigest())


def select_subset_hours(
    inputs: list[InputFile], *, max_hours: float, seed: int, io_threads: int = 8
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
        durations = pool.map(lambda item: 0.0 if item.problem else audio_duration_s(item.path), ordered)
        for item, duration_s in zip(ordered, durations):
            if total_s >= budget_s:
                break
            selected.append(item)
            total_s += duration_s
    return selected
