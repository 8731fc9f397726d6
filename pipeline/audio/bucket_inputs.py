"""Prep inputs in a bucket: the audio objects under a prefix, and objects a manifest names by URI.

A prefix is listed recursively through pyarrow's filesystem (the same endpoint and credential
conventions as every other location: `s3://BUCKET/PATH?endpoint_override=HOST:PORT&scheme=http`, or the
usual AWS/GCP variables); each object keeps the prefix's options in its URI, and its source name is its
key below the prefix, as a file's is its path below the input folder. Objects are never downloaded
here: listing gives sizes and times, the workers read the bytes (`pipeline.audio.input_bytes`).
"""

from __future__ import annotations

import urllib.parse
from concurrent.futures import ThreadPoolExecutor

import pyarrow.fs as pafs

from pipeline.storage.bucket_check import open_uri, storage_error
from pipeline.storage.uri import child_uri

# Listing and stat requests wait on the network, not the CPU.
IO_THREADS = 16


def object_uri(prefix_uri: str, relative_key: str) -> str:
    """The URI of the object `relative_key` below `prefix_uri`, with the prefix's options; the key is
    percent-encoded (pyarrow decodes it), so spaces and `#` in names survive."""
    return child_uri(prefix_uri, urllib.parse.quote(relative_key))


def with_options_of(uri: str, base_uri: str) -> str:
    """A URI a manifest wrote without options (`s3://b/k.flac`) takes those of the manifest's own URI
    when both are on the same scheme: one endpoint setting for the manifest and what it names."""
    parts, base = urllib.parse.urlsplit(uri), urllib.parse.urlsplit(base_uri)
    if parts.query or not base.query or parts.scheme != base.scheme:
        return uri
    return urllib.parse.urlunsplit(parts._replace(query=base.query))


def list_prefix(uri: str, *, what: str = "--input") -> list[tuple[str, pafs.FileInfo]]:
    """(key below the prefix, file info) of every object under the prefix `uri`, sorted by key."""
    filesystem, path = open_uri(uri, what=what)
    try:
        infos = filesystem.get_file_info(pafs.FileSelector(path, recursive=True, allow_not_found=True))
    except OSError as error:
        raise storage_error(uri, error, what=what, doing="list it") from None
    found = [(info.path[len(path) :].lstrip("/"), info) for info in infos if info.type == pafs.FileType.File]
    return sorted(found, key=lambda pair: pair[0])


def kind_of(uri: str, *, what: str = "--input") -> pafs.FileType:
    """File, Directory (a prefix with objects under it) or NotFound; a store that does not answer is a
    UserError naming `what` and the endpoint."""
    filesystem, path = open_uri(uri, what=what)
    try:
        return filesystem.get_file_info(path).type
    except OSError as error:
        raise storage_error(uri, error, what=what, doing="look it up") from None


def read_object_text(uri: str, *, what: str = "--input") -> str:
    filesystem, path = open_uri(uri, what=what)
    try:
        with filesystem.open_input_stream(path) as stream:
            return stream.read().decode("utf-8")
    except OSError as error:
        raise storage_error(uri, error, what=what, doing="read it") from None


def stat_objects(uris: list[str]) -> list[pafs.FileInfo | OSError | ValueError]:
    """Each object's info (one request each, in threads), or the error that stopped its lookup."""

    def stat(uri: str) -> pafs.FileInfo | OSError | ValueError:
        try:
            filesystem, path = pafs.FileSystem.from_uri(uri)
            return filesystem.get_file_info(path)
        except (OSError, ValueError) as error:  # ArrowInvalid (a URI pyarrow cannot parse) is a ValueError
            return error

    with ThreadPoolExecutor(IO_THREADS) as pool:
        return list(pool.map(stat, uris))


def parent_uri(uri: str) -> str:
    """The folder (prefix) holding the object `uri`, its options kept."""
    parts = urllib.parse.urlsplit(uri)
    return urllib.parse.urlunsplit(parts._replace(path=parts.path.rstrip("/").rpartition("/")[0]))
