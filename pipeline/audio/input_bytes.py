"""Where an input's bytes are, and opening them as a seekable file: a file on this machine, an object in a
bucket (`s3://`, `gs://`, ...), or one member of a WebDataset `.tar` shard held in either.

Decoders (libsndfile through `soundfile`, `tarfile`) read through a file object. For a bucket, every
read of pyarrow's random-access file is one ranged GET, and libsndfile reads a few kilobytes at a time:
`ReadAheadFile` turns those into GETs of `REMOTE_BLOCK_BYTES`, so a typical clip (a few hundred kB of
FLAC) is one request and a long file is streamed in blocks, never held whole. A tar member is a window
of its tar, opened at its offset; nothing else of the tar is read. Local files keep the plain path: the
decoder opens them itself, as before.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import os
from collections.abc import Iterator

import pyarrow as pa
import pyarrow.fs as pafs

from pipeline.storage.uri import is_uri

# One GET per 8 MiB: a 10 s FLAC clip in one request, a long file in blocks of a minute or so of audio.
REMOTE_BLOCK_BYTES = 8 * 1024**2
# What reading a header needs (an audio file's, or a tar member's 512 bytes and a small KEY.json): the
# read-ahead of listings and durations, which must not pull whole files from a bucket.
HEADER_BLOCK_BYTES = 64 * 1024


@dataclasses.dataclass(frozen=True, kw_only=True)
class InputLocation:
    """The bytes of one input: a whole file (`member_offset` None) or the member of the tar at `path`
    whose data starts at `member_offset` and is `member_size` bytes long."""

    path: str  # a local path or a URI (its options, e.g. `?endpoint_override=...`, kept)
    member_offset: int | None = None
    member_size: int | None = None

    @property
    def is_local_file(self) -> bool:
        return self.member_offset is None and not is_uri(self.path)


def open_filesystem(path: str) -> tuple[pafs.FileSystem, str]:
    """(filesystem, path on it) of a local path or a URI."""
    if not is_uri(path):
        return pafs.LocalFileSystem(), os.path.abspath(path)
    filesystem, inner = pafs.FileSystem.from_uri(path)
    return filesystem, inner


class ReadAheadFile(io.RawIOBase):
    """A read-only, seekable window [start, start + size) of a pyarrow random-access file, read in
    blocks of `block_bytes` (0: every read goes straight through)."""

    def __init__(self, raw: pa.NativeFile, *, start: int = 0, size: int | None = None, block_bytes: int = 0):
        super().__init__()
        self._raw = raw
        self._start = start
        self._size = raw.size() - start if size is None else size
        self._block_bytes = block_bytes
        self._position = 0
        self._block_start, self._block = 0, b""

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._position

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._position, io.SEEK_END: self._size}[whence]
        self._position = max(0, base + offset)
        return self._position

    def readinto(self, buffer) -> int:
        view = memoryview(buffer).cast("B")
        wanted = min(len(view), max(0, self._size - self._position))
        if wanted == 0:
            return 0
        data = self._read_at(self._position, wanted)
        view[: len(data)] = data
        self._position += len(data)
        return len(data)

    def _read_at(self, position: int, count: int) -> bytes | memoryview:
        if not self._block_bytes:
            return self._raw.read_at(count, self._start + position)
        offset = position - self._block_start
        if not (0 <= offset and offset + count <= len(self._block)):
            length = min(max(count, self._block_bytes), self._size - position)
            self._block_start, self._block = position, self._raw.read_at(length, self._start + position)
            offset = 0
        return memoryview(self._block)[offset : offset + count]

    def close(self) -> None:
        self._block = b""
        super().close()


@contextlib.contextmanager
def open_input_bytes(location: InputLocation, *, block_bytes: int = REMOTE_BLOCK_BYTES) -> Iterator[io.RawIOBase]:
    """The input's bytes as a seekable binary file; from a bucket, read ahead `block_bytes` at a time."""
    filesystem, path = open_filesystem(location.path)
    remote = not isinstance(filesystem, pafs.LocalFileSystem)
    with filesystem.open_input_file(path) as raw:
        window = ReadAheadFile(
            raw,
            start=location.member_offset or 0,
            size=location.member_size,
            block_bytes=block_bytes if remote else 0,
        )
        with window:
            yield window
