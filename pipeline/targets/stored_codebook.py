"""A codebook kept in a bucket beside its shards: fitted locally and uploaded, read through a local copy.

A cluster keeps its shards in a bucket, so the target stage keeps their codebooks there too
(`s3://.../shards/targets/<key>`), where every node finds them. Every reader of a codebook (numpy,
safetensors, the checkpoint's bundled copy) wants a local folder and a codebook is a few files (kB
for MFCC targets, the teacher's layers for iteration 2), so:
- a fit writes its usual local folder in a temporary place, then uploads it with codebook.json last:
  a folder in the bucket without codebook.json is an unfinished fit, as a local one is;
- a reader gets a local copy kept per machine in the system's temporary folder and named by the
  codebook's key (each Train worker on a node reuses it); the copy is refreshed when the bucket's
  codebook.json differs from the copy's (a --refit).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from pathlib import Path

import pyarrow.fs as pafs

from models.wave.hubert_codebook import CODEBOOK_MANIFEST_NAME, MAKE_ONE, CodebookError
from pipeline.storage.bucket_check import open_uri, storage_error, without_query
from pipeline.storage.uri import is_uri

LOCAL_COPIES_DIR_NAME = "audioscale-codebooks"


def upload_codebook(local_dir: Path, uri: str) -> None:
    """Copy the finished codebook folder `local_dir` to `uri`, its codebook.json last."""
    filesystem, path = open_uri(uri, what="the codebook folder")
    names = sorted(entry.name for entry in local_dir.iterdir() if entry.name != CODEBOOK_MANIFEST_NAME)
    try:
        for name in [*names, CODEBOOK_MANIFEST_NAME]:
            pafs.copy_files(
                str(local_dir / name), f"{path}/{name}",
                source_filesystem=pafs.LocalFileSystem(), destination_filesystem=filesystem,
            )  # fmt: skip
    except OSError as error:
        raise storage_error(uri, error, what="the codebook folder", doing="upload the codebook") from None


def remote_manifest_text(uri: str) -> str | None:
    """The text of the bucket codebook's codebook.json; None when the folder holds none (no fit, or an
    unfinished one)."""
    filesystem, path = open_uri(uri, what="the codebook folder")
    manifest = f"{path}/{CODEBOOK_MANIFEST_NAME}"
    try:
        if filesystem.get_file_info(manifest).type != pafs.FileType.File:
            return None
        with filesystem.open_input_stream(manifest) as stream:
            return stream.read().decode("utf-8")
    except OSError as error:
        raise storage_error(uri, error, what="the codebook folder", doing="read codebook.json") from None


def local_codebook(location: str | Path) -> Path:
    """A local folder holding the codebook at `location`: the folder itself, or this machine's copy of a
    bucket codebook (downloaded when missing or different from the bucket's)."""
    if not is_uri(location):
        return Path(location)
    uri = str(location)
    manifest = remote_manifest_text(uri)
    if manifest is None:
        raise CodebookError(f"{without_query(uri)} holds no finished codebook; {MAKE_ONE}")
    name = uri.partition("?")[0].rstrip("/").rpartition("/")[2]
    # The key names the shards and settings; the digest of the URI keeps two buckets' copies apart.
    local = _local_copies_dir() / f"{name}-{hashlib.sha256(uri.encode()).hexdigest()[:8]}"
    copied = local / CODEBOOK_MANIFEST_NAME
    if copied.is_file() and copied.read_text() == manifest:
        return local
    _download(uri, local)
    return local


def _local_copies_dir() -> Path:
    directory = Path(tempfile.gettempdir()) / LOCAL_COPIES_DIR_NAME
    directory.mkdir(parents=True, exist_ok=True)
    return directory


def _download(uri: str, local: Path) -> None:
    """Download into a private sibling, then swap it in: a worker never reads a half-copied folder."""
    filesystem, path = open_uri(uri, what="the codebook folder")
    partial = local.with_name(f"{local.name}.tmp-{os.getpid()}")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    try:
        pafs.copy_files(path, str(partial), source_filesystem=filesystem, destination_filesystem=pafs.LocalFileSystem())
    except OSError as error:
        shutil.rmtree(partial, ignore_errors=True)
        raise storage_error(uri, error, what="the codebook folder", doing="download the codebook") from None
    shutil.rmtree(local, ignore_errors=True)
    try:
        partial.rename(local)
    except OSError:  # another worker on this machine finished the same copy first: theirs is as good
        shutil.rmtree(partial, ignore_errors=True)
