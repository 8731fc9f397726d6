"""One prep input as listed: where its bytes are, the name it keeps in the shards, its label and split,
and, when it cannot even be opened, why (so prep rejects it by name instead of dropping it).

An input is a file on this machine, an object in a bucket, or an audio member of a WebDataset tar shard
held in either (`pipeline.audio.input_bytes.InputLocation` says which). Listing is done by
`pipeline.audio.inputs` (folders, prefixes, tars) and `pipeline.audio.input_manifest` (CSV/JSONL).
"""

from __future__ import annotations

import dataclasses
import posixpath
from pathlib import Path

from pipeline.audio.input_bytes import InputLocation

# What a listing picks up; every other file is counted as skipped in the summary.
AUDIO_EXTENSIONS = frozenset({".wav", ".flac", ".ogg", ".oga", ".mp3", ".aif", ".aiff", ".au", ".w64", ".opus"})
MANIFEST_EXTENSIONS = frozenset({".csv", ".jsonl"})
DUPLICATE_KIND = "duplicate entry"  # the problem_kind of a second name for an input already listed
UNREADABLE_FOLDER_KIND = "unreadable folder"  # the problem_kind of a folder the walk could not list
NOT_UTF8_KIND = "file name not UTF-8"


class InputListingError(ValueError):
    """The --input (or a setting about it) is unusable as given; the message says how to fix it."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class InputFile:
    path: str  # absolute path or URI to open (of the tar shard, for a member of one)
    source: str  # name recorded in the shards and in rejected.jsonl
    label: str | None = None
    split: str | None = None
    size_bytes: int = 0
    mtime_ns: int = 0
    problem: str | None = None  # set when the file cannot be opened at all; the input is rejected
    problem_kind: str | None = None
    member_offset: int | None = None  # a tar member: where its bytes start in the shard at `path`

    @property
    def location(self) -> InputLocation:
        if self.member_offset is None:
            return InputLocation(path=self.path)
        return InputLocation(path=self.path, member_offset=self.member_offset, member_size=self.size_bytes)


@dataclasses.dataclass(kw_only=True)
class InputListing:
    inputs: list[InputFile]
    skipped_non_audio: int = 0  # files (or tar members) without an audio extension
    skipped_symlink_loops: list[str] = dataclasses.field(default_factory=list)  # folders seen twice

    def extend(self, other: InputListing) -> None:
        self.inputs.extend(other.inputs)
        self.skipped_non_audio += other.skipped_non_audio
        self.skipped_symlink_loops.extend(other.skipped_symlink_loops)


def stat_local_input(path: Path, source: str, **fields) -> InputFile:
    """A local file as an input: its size and time, or why it cannot be one (missing, a broken link, ...)."""
    try:
        stat = path.stat()  # follows links: a broken or looping link fails here
    except FileNotFoundError:
        kind = "broken symlink" if path.is_symlink() else "missing file"
        return InputFile(path=str(path), source=source, problem=f"{kind}: {path}", problem_kind=kind, **fields)
    except OSError as error:
        return InputFile(path=str(path), source=source, problem=f"cannot stat ({error.strerror})",
                         problem_kind="unreadable", **fields)  # fmt: skip
    if not path.is_file():
        return InputFile(
            path=str(path), source=source, problem="not a regular file", problem_kind="not a file", **fields
        )
    return InputFile(
        path=str(path.absolute()), source=source, size_bytes=stat.st_size, mtime_ns=stat.st_mtime_ns, **fields
    )


def is_audio_name(name: str) -> bool:
    return posixpath.splitext(name)[1].lower() in AUDIO_EXTENSIONS


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
