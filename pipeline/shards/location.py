"""Where a shard directory lives: a local folder, or a URI on shared storage.

A cluster reads its shards from a bucket (`--shards s3://bucket/shards`), a laptop from a folder.
Every shard reader resolves its argument once into a pyarrow filesystem plus a path on it, so one
code path reads both. A URI is anything `pyarrow.fs.FileSystem.from_uri` accepts: `s3://`, `gs://`,
`hdfs://`, `file://`, with filesystem options as query parameters (for example
`s3://bucket/shards?endpoint_override=minio:9000&scheme=http`); credentials come from the usual
environment (AWS/GCP variables, instance roles). Anything else is a local path.
"""

from __future__ import annotations

import dataclasses
import fnmatch
from pathlib import Path

import pyarrow as pa
import pyarrow.fs as pafs

from pipeline.storage.uri import child_location, is_uri

__all__ = ["ShardLocation", "ShardLocationError", "is_uri", "locate_shards"]


class ShardLocationError(ValueError):
    """A shard location that names no filesystem pyarrow can open."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class ShardLocation:
    given: str | Path  # as the caller wrote it; used in messages and in `as_given`
    filesystem: pafs.FileSystem
    path: str  # the directory on `filesystem` (absolute for local folders)

    def child_path(self, name: str) -> str:
        """Path of the entry `name` on `self.filesystem`."""
        return f"{self.path.rstrip('/')}/{name}"

    def as_given(self, name: str) -> str | Path:
        """The entry `name` in the form the location was given: a Path for a folder, else a URI."""
        return child_location(self.given, name)

    def read_text(self, name: str) -> str | None:
        """The UTF-8 text of the file `name`, or None when there is no such file."""
        path = self.child_path(name)
        if self.filesystem.get_file_info(path).type != pafs.FileType.File:
            return None
        with self.filesystem.open_input_stream(path) as stream:
            return stream.read().decode("utf-8")

    def file_names(self, pattern: str) -> list[str]:
        """Sorted names of the regular files directly inside matching the glob `pattern`."""
        selector = pafs.FileSelector(self.path, allow_not_found=True, recursive=False)
        infos = self.filesystem.get_file_info(selector)
        return sorted(
            info.base_name
            for info in infos
            if info.type == pafs.FileType.File and fnmatch.fnmatchcase(info.base_name, pattern)
        )


def locate_shards(shard_dir: str | Path) -> ShardLocation:
    """Resolve a local path or a URI; raises `ShardLocationError` naming the URI when pyarrow
    knows no filesystem for it."""
    if not is_uri(shard_dir):
        # Absolute, so Ray workers (whose working directory differs) open the same folder.
        return ShardLocation(
            given=shard_dir, filesystem=pafs.LocalFileSystem(), path=str(Path(shard_dir).expanduser().absolute())
        )
    try:
        filesystem, path = pafs.FileSystem.from_uri(str(shard_dir))
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as error:
        raise ShardLocationError(
            f"cannot open shard location {shard_dir}: {error}. Use a local folder or a URI that "
            "pyarrow.fs.FileSystem.from_uri understands (s3://, gs://, hdfs://, file://)."
        ) from error
    return ShardLocation(given=shard_dir, filesystem=filesystem, path=path.rstrip("/") or "/")
