"""The checkpoints a run's storage really holds, checked after training and named as a user types them.

Ray Train registers a checkpoint when its copy to storage returns, but pyarrow ignores an error that
happens while it closes an upload stream ("Error ignored when destroying file", on stderr of a Ray
worker only): with the store gone mid-upload (measured against the cluster rehearsal's store, cut
while step 6 was copied), Ray reported "Checkpoint successfully created", registered a folder that
held only model.json, and then deleted the older, whole checkpoint to keep two. On S3 an object is
whole or absent, so a checkpoint is complete exactly when model.json and every file whose sha256 it
records are there: one listing, no download. The driver drops incomplete ones from the run's result
(so a study never evaluates them), says which and why, and fails the run when the final one is
incomplete; a resume already skips them (`pipeline.pretrain.resume`).
"""

from __future__ import annotations

import json
import urllib.parse

import pyarrow.fs as pafs

from pipeline.checkpoint import DIGESTS_KEY, META_FILE


def missing_files(path: str, filesystem: pafs.FileSystem) -> list[str]:
    """Names a complete checkpoint at `path` has and this one lacks (empty when it is complete)."""
    selector = pafs.FileSelector(path.rstrip("/"), allow_not_found=True)
    present = {info.base_name for info in filesystem.get_file_info(selector) if info.type == pafs.FileType.File}
    if META_FILE not in present:
        return [META_FILE]
    with filesystem.open_input_stream(f"{path.rstrip('/')}/{META_FILE}") as stream:
        recorded = json.loads(stream.read().decode("utf-8")).get(DIGESTS_KEY, {})
    return sorted(name for name in recorded if name not in present)


def as_uri(path: str, storage_path: str) -> str:
    """A checkpoint's `path` on its filesystem as the user can pass it on (`--checkpoint`): on a
    bucket, Ray's bare `bucket/key` gets the scheme and the endpoint options of `--storage-path`."""
    if "://" not in storage_path:
        return path
    parts = urllib.parse.urlsplit(storage_path)
    return f"{parts.scheme}://{path.lstrip('/')}" + (f"?{parts.query}" if parts.query else "")
