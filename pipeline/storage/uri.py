"""A storage location is a local path or a URI (`s3://BUCKET/PATH?endpoint_override=HOST:PORT&scheme=http`).

A URI is anything with a scheme (`s3://`, `gs://`, `hdfs://`, `file://`); its options ride in the
query, so a child of a URI goes before the query. Plain string work, no filesystem: cheap to import
from the modules that only name places (pipeline.storage.paths).
"""

from __future__ import annotations

import re
import urllib.parse
from pathlib import Path

_URI_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")


def is_uri(location: str | Path) -> bool:
    return not isinstance(location, Path) and bool(_URI_SCHEME.match(str(location)))


def child_uri(uri: str, name: str) -> str:
    """The entry `name` under the folder `uri`, the URI's options kept."""
    parts = urllib.parse.urlsplit(uri)
    return urllib.parse.urlunsplit(parts._replace(path=f"{parts.path.rstrip('/')}/{name}"))


def child_location(folder: str | Path, name: str) -> str | Path:
    """The entry `name` under `folder`: a Path under a local folder, a URI under a URI."""
    return child_uri(str(folder), name) if is_uri(folder) else Path(folder) / name
