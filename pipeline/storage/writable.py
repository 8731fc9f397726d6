"""Is a place writable? Asked before any work starts, so a read-only or full disk, or a path under
a file, is one line naming the path instead of a traceback minutes later.

The check creates (and removes) a small file rather than asking `os.access`: as root, `access`
says yes to a directory whatever its mode, and only a real write finds a read-only mount or a full
disk. A folder that does not exist yet is checked at its nearest existing parent (the commands make
the rest); nothing is created there by the check.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import urllib.parse
from pathlib import Path

from pipeline.cli.errors import UserError

# Enough for a checkpoint's metadata to fit: a disk with less than this left is refused up front.
PROBE_BYTES = 64 * 1024


def nearest_existing(path: Path) -> Path:
    """`path` itself, or its closest ancestor that exists (the folders a command will make go under it)."""
    while not path.exists() and path.parent != path:
        path = path.parent
    return path


def check_writable_dir(path: str | os.PathLike, *, what: str, named: str | os.PathLike | None = None) -> None:
    """Raise UserError naming `what` and the path unless a file can be written in `path` (or, when it
    does not exist yet, in its nearest existing parent, which must be a directory). `named`: the
    path the message names, when it is not `path` (a file to be made in it)."""
    place = Path(path).expanduser().absolute()
    shown = Path(named).expanduser().absolute() if named is not None else place
    existing = nearest_existing(place)
    if not existing.is_dir():
        raise UserError(f"{what} {shown}: {existing} is a file, not a directory; choose another path")
    try:
        with tempfile.TemporaryFile(dir=existing, prefix=".audioscale-write-check-") as probe:
            probe.write(b"\0" * PROBE_BYTES)
            probe.flush()
            os.fsync(probe.fileno())
    except OSError as error:
        raise UserError(
            f"{what} {shown}: cannot write in {existing} ({error.strerror or error}); "
            "choose a writable path with free space"
        ) from None


def check_writable_file(path: str | os.PathLike, *, what: str) -> None:
    """An existing file must open for appending (nothing is written); a new one needs a writable folder."""
    place = Path(path).expanduser().absolute()
    if not place.exists():
        check_writable_dir(place.parent, what=what, named=place)
        return
    if place.is_dir():
        raise UserError(f"{what} {place} is a directory, not a file")
    try:
        with place.open("ab"):
            pass
    except OSError as error:
        raise UserError(
            f"{what} {place}: cannot write it ({error.strerror or error}); choose a writable path"
        ) from None
    check_writable_dir(place.parent, what=what, named=place)  # SQLite writes its journal beside the file


def check_local_store(tracking_uri: str) -> None:
    """A sqlite:/// or file: tracking store on this machine must be writable (a server checks its own)."""
    parsed = urllib.parse.urlparse(tracking_uri)
    if parsed.scheme == "sqlite" and tracking_uri.startswith("sqlite:///"):
        check_writable_file(tracking_uri[len("sqlite:///") :], what="--tracking-uri")
    elif parsed.scheme == "file" or (parsed.scheme == "" and tracking_uri):
        check_writable_dir(parsed.path or tracking_uri, what="--tracking-uri")


def check_free_space(path: str | os.PathLike, needed_bytes: int, *, what: str, why: str) -> None:
    """Raise UserError unless the filesystem holding `path` (or its nearest existing parent) has
    `needed_bytes` free: a run that fills the disk fails only when a checkpoint is being copied,
    minutes in, and leaves that checkpoint half written."""
    free = shutil.disk_usage(nearest_existing(Path(path).expanduser().absolute())).free
    if free < needed_bytes:
        raise UserError(
            f"{what} {path}: {_megabytes(free)} free, but {why} needs about {_megabytes(needed_bytes)}; "
            "free some space, choose another path, or keep fewer checkpoints"
        )


def _megabytes(count: int) -> str:
    return f"{count / 1e6:.1f} MB"
