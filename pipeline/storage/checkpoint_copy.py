"""A checkpoint folder in a bucket, read as a local folder: copied down whole to a temporary folder.

Checkpoints are a few files read in full (weights, the model's description, the optimizer state),
and every reader (torch, safetensors, the digest check) wants a local path, so a checkpoint on
`s3://` is copied down once and read there. Results that belong beside a checkpoint (evaluation's
`evaluation/` folder) are copied back up the same way.
"""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pyarrow.fs as pafs

from pipeline.cli.errors import UserError
from pipeline.storage.bucket_check import check_bucket, open_uri, without_query
from pipeline.storage.uri import is_uri


def copy_down(path: str, filesystem: pafs.FileSystem, into: Path) -> Path:
    """Copy the folder `path` on `filesystem` to `into/<its name>`; returns that local folder."""
    local = Path(into) / path.rstrip("/").rpartition("/")[2]
    # pyarrow copies a folder's files but makes no local folder for them: without this, every resume
    # from a bucket failed with "Failed to open local file .../model.json".
    local.mkdir(parents=True, exist_ok=True)
    pafs.copy_files(path, str(local), source_filesystem=filesystem, destination_filesystem=pafs.LocalFileSystem())
    return local


@contextlib.contextmanager
def local_checkpoint(location: str | Path, *, what: str = "--checkpoint") -> Iterator[Path]:
    """`location` itself when it is a local folder; a checked local copy of it when it is a URI."""
    if not is_uri(location):
        yield Path(location)
        return
    uri = str(location)
    check_bucket(uri, what=what, write=False)
    filesystem, path = open_uri(uri, what=what)
    if filesystem.get_file_info(path).type != pafs.FileType.Directory:
        raise UserError(f"{what} {without_query(uri)}: no checkpoint folder there; check the path")
    with tempfile.TemporaryDirectory(prefix="audioscale-checkpoint-") as directory:
        yield copy_down(path, filesystem, Path(directory))


def copy_up(local_dir: Path, uri: str, *, what: str) -> str:
    """Copy the local folder `local_dir` to `uri` (a folder in a bucket); returns `uri` without options."""
    filesystem, path = open_uri(uri, what=what)
    pafs.copy_files(str(local_dir), path, source_filesystem=pafs.LocalFileSystem(), destination_filesystem=filesystem)
    return without_query(uri)
