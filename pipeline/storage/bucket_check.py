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
        _refuse_an_object(filesystem, path, uri=uri, what=what)
        _write_probe(filesystem, path, uri=uri, what=what)


def _refuse_an_object(filesystem: pafs.FileSystem, path: str, *, uri: str, what: str) -> None:
    """A place a run writes under must be a prefix: keys under an object's name (`.../manifest.json/...`)
    are legal in a bucket, but no reader would look for them there."""
    try:
        found = filesystem.get_file_info(path)
    except OSError as error:
        raise storage_error(uri, error, what=what, doing="look it up") from None
    if found.type == pafs.FileType.File:
        raise UserError(
            f"{what} {without_query(uri)}: that is an object ({found.size} bytes), not a folder; "
            "name a prefix to write under (for example its parent)"
        )


# A probe that is not all one byte: a store that keeps an upload's framing returns other bytes than these.
PROBE_BYTES = bytes(range(256)) * 4
CHECKSUM_VARIABLE = "AWS_REQUEST_CHECKSUM_CALCULATION"


def _write_probe(filesystem: pafs.FileSystem, path: str, *, uri: str, what: str) -> None:
    """Write a small object, read it back, delete it: only a real write finds a read-only policy, and only a
    read-back finds a store that keeps the `aws-chunked` framing of an upload as the object's bytes."""
    probe = f"{path}/{PROBE_PREFIX}{uuid.uuid4().hex}"
    try:
        with filesystem.open_output_stream(probe) as stream:
            stream.write(PROBE_BYTES)
        with filesystem.open_input_stream(probe) as stream:
            read_back = stream.read()
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
    if read_back != PROBE_BYTES:
        raise UserError(framing_advice(uri, what=what, written=len(PROBE_BYTES), read_back=read_back))


def framing_advice(uri: str, *, what: str, written: int, read_back: bytes) -> str:
    """The one line for a store that returned other bytes than it was sent: with the `aws-chunked` framing
    kept (older MinIO, Ceph RGW and other S3 clones do not decode it), every Parquet file it holds is
    unreadable, so nothing is written there until the uploads are sent plain."""
    head = read_back[:12].decode("latin-1").encode("unicode_escape").decode()
    size_field = read_back.split(b"\r\n", 1)[0].split(b";")[0]  # a chunk starts "<hex size>[;signature]\r\n"
    framing = b"\r\n" in read_back[:80] and bool(size_field) and all(c in b"0123456789abcdefABCDEF" for c in size_field)
    cause = (
        "it keeps the aws-chunked framing of uploads in the objects (it does not decode Content-Encoding: aws-chunked)"
        if framing
        else "the bytes differ"
    )
    return (
        f"{what} {without_query(uri)} (at {endpoint_of(uri)}): a {written}-byte test object read back as "
        f"{len(read_back)} bytes starting {head!r}: {cause}; set {CHECKSUM_VARIABLE}=WHEN_REQUIRED in the "
        'environment of every process and node that writes there (cluster/README.md, "Stores that are not AWS")'
    )
