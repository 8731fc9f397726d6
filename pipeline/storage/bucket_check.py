"""Is a bucket usable? Asked before any work starts, so a wrong key, a bucket that does not exist, an
endpoint that is down or a read-only policy is one line naming the flag, the URI and what to do,
instead of a traceback from inside a Ray worker minutes later.

The counterpart of `pipeline.storage.writable` for object stores (`s3://`, `gs://`, ...). The check makes
the requests the run will make: it looks up the bucket itself (an S3 listing of a missing prefix
is only "not found", which would pass a misspelt bucket), and for a place the run writes to it
writes and deletes a small object, because only a real write finds a read-only policy. Local paths
are left to `pipeline.storage.writable`.

The error text of pyarrow's filesystems carries the S3 error kind (`ACCESS_DENIED`,
`NETWORK_CONNECTION`, `NO_SUCH_BUCKET`, ...); each kind is turned into the advice a user needs.
"""

from __future__ import annotations

import os
import urllib.parse
import uuid

import pyarrow as pa
import pyarrow.fs as pafs

from pipeline.cli.errors import UserError
from pipeline.storage.uri import is_uri

PROBE_PREFIX = ".audioscale-write-check-"

# (fragment of pyarrow's error text, what it means for the user). Checked in order.
_ADVICE = (
    (
        ("ACCESS_DENIED", "INVALID_ACCESS_KEY_ID", "SIGNATURE_DOES_NOT_MATCH", "403"),
        "the store refused these credentials (check AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY, "
        "or the role's permissions on this bucket)",
    ),
    (("NO_SUCH_BUCKET",), "the bucket does not exist; create it or fix the bucket name"),
    (
        ("NETWORK_CONNECTION", "curlCode", "Could not connect", "Couldn't connect", "timed out"),
        "cannot reach the store; is it running, and is the endpoint right "
        "(`?endpoint_override=HOST:PORT&scheme=http` in the URI, or AWS_ENDPOINT_URL)?",
    ),
)


def endpoint_of(uri: str) -> str:
    """Where requests for `uri` go, as a user would name it (for messages)."""
    query = urllib.parse.parse_qs(urllib.parse.urlsplit(uri).query)
    if "endpoint_override" in query:
        return f"{query.get('scheme', ['https'])[0]}://{query['endpoint_override'][0]}"
    if uri.startswith("s3://") and os.environ.get("AWS_ENDPOINT_URL"):
        return os.environ["AWS_ENDPOINT_URL"]
    return f"the default {uri.split('://', 1)[0]} endpoint"


def without_query(uri: str) -> str:
    """`uri` without its options (`?endpoint_override=...`): what a message names."""
    return urllib.parse.urlunsplit(urllib.parse.urlsplit(uri)._replace(query=""))


def storage_error(uri: str, error: BaseException, *, what: str, doing: str) -> UserError:
    """A UserError naming the flag, the URI, the endpoint and the advice for pyarrow's `error`."""
    text = str(error)
    advice = next(
        (advice for fragments, advice in _ADVICE if any(fragment in text for fragment in fragments)),
        f"the store answered: {text.splitlines()[0][:200] if text else type(error).__name__}",
    )
    return UserError(f"{what} {without_query(uri)} (at {endpoint_of(uri)}): cannot {doing}: {advice}")


def open_uri(uri: str, *, what: str) -> tuple[pafs.FileSystem, str]:
    """(filesystem, path) of a URI, or a UserError naming the flag when pyarrow cannot open it."""
    try:
        filesystem, path = pafs.FileSystem.from_uri(uri)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, OSError) as error:
        raise UserError(
            f"{what} {without_query(uri)}: not a storage URI pyarrow can open ({str(error).splitlines()[0]}); "
            "use a local path or s3://BUCKET/PATH (gs://, hdfs:// also work)"
        ) from None
    return filesystem, path.rstrip("/")


def check_bucket(uri: str, *, what: str, write: bool) -> None:
    """Raise UserError unless the bucket of `uri` exists and answers these credentials, and (with
    `write`) accepts an object under `uri`. Local paths and `file://` URIs pass untouched."""
    if not is_uri(uri) or uri.startswith("file://"):
        return
    filesystem, path = open_uri(uri, what=what)
    if isinstance(filesystem, pafs.LocalFileSystem):
        return
    bucket = path.split("/", 1)[0]
    try:
        found = filesystem.get_file_info(bucket)
    except OSError as error:
        raise storage_error(uri, error, what=what, doing=f"look up bucket {bucket!r}") from None
    if found.type == pafs.FileType.NotFound:
        raise UserError(
            f"{what} {without_query(uri)} (at {endpoint_of(uri)}): bucket {bucket!r} does not exist; "
            "create it first or fix the bucket name"
        )
    if write:
        _write_probe(filesystem, path, uri=uri, what=what)


def _write_probe(filesystem: pafs.FileSystem, path: str, *, uri: str, what: str) -> None:
    probe = f"{path}/{PROBE_PREFIX}{uuid.uuid4().hex}"
    try:
        with filesystem.open_output_stream(probe) as stream:
            stream.write(b"\0")
    except OSError as error:
        if "ACCESS_DENIED" in str(error):
            raise UserError(
                f"{what} {without_query(uri)} (at {endpoint_of(uri)}): these credentials may read the bucket but "
                "not write in it (a read-only policy?); use credentials or a role allowed s3:PutObject there"
            ) from None
        raise storage_error(uri, error, what=what, doing="write in it") from None
    try:
        filesystem.delete_file(probe)
    except OSError as error:
        raise storage_error(uri, error, what=what, doing="delete in it (the run replaces its own files)") from None
