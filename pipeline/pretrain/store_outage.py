"""A bucket that stops answering mid-run: waited for, then the run resumed from its last whole checkpoint.

What a store outage does to a run (measured against the cluster rehearsal's store behind a proxy cut
for 25 s and for 70 s): the AWS SDK's own retries ride out a short one; a longer one ends Ray Train's
`fit` with a ControllerError (writing `checkpoint_manager_snapshot.json`) or a worker's failed upload,
which `--max-failures` does not cover. The driver then (`pipeline.pretrain.driver`): sees that the error
is the store's (`is_store_outage`), waits for the bucket to answer again with growing pauses up to
`--store-wait-s` (`wait_for_store`), and fits again under the same run name, which resumes from the
newest whole checkpoint exactly as a re-run does; each such resume counts against `--max-failures`.
A longer outage ends in one line saying what is kept and how to resume. Checkpoints a resume leaves
beyond `--keep-checkpoints` (Ray's bookkeeping restarts with the resume) are removed afterwards
(`prune_checkpoints`).
"""

from __future__ import annotations

import re
import time

import pyarrow.fs as pafs

from pipeline.cli.errors import UserError
from pipeline.pretrain.resume import CHECKPOINT_PREFIX
from pipeline.storage.bucket_check import endpoint_of, without_query

# Failures that pass (the store unreachable, overloaded or failing inside); not a refused key or a
# missing bucket, which no waiting fixes.
TRANSIENT = re.compile(
    r"NETWORK_CONNECTION|curlCode|Could not connect|Connection refused|HTTP status 5\d\d|INTERNAL_FAILURE|"
    r"SERVICE_UNAVAILABLE|SLOW_DOWN|REQUEST_TIMEOUT|timed out"
)
FIRST_PAUSE_S, LONGEST_PAUSE_S = 2.0, 30.0


def is_store_outage(error: BaseException) -> bool:
    """The error, or one it came from, is an object store's passing failure as pyarrow reports it."""
    seen: set[int] = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        if TRANSIENT.search(str(error)):
            return True
        error = error.__cause__ or error.__context__
    return False


def store_answers(storage_path: str) -> bool:
    """One cheap request: the bucket's own entry."""
    try:
        filesystem, path = pafs.FileSystem.from_uri(storage_path)
        filesystem.get_file_info(path.split("/", 1)[0])
    except OSError:
        return False
    return True


def wait_for_store(storage_path: str, *, limit_s: float, last_step: int, say=print, clock=time.monotonic) -> float:
    """Wait (pauses of 2, 4, ... 30 s) until the bucket of `storage_path` answers; the seconds waited.
    Raises UserError when it has not answered for `limit_s`."""
    started, pause = clock(), FIRST_PAUSE_S
    while not store_answers(storage_path):
        waited = clock() - started
        if waited >= limit_s:
            raise UserError(outage_message(storage_path, waited_s=waited, last_step=last_step))
        time.sleep(min(pause, max(0.0, limit_s - waited)))
        pause = min(2 * pause, LONGEST_PAUSE_S)
    return clock() - started


def outage_message(storage_path: str, *, waited_s: float, last_step: int) -> str:
    reached = f"training had reached step {last_step}; " if last_step > 0 else ""
    return (
        f"--storage-path {without_query(storage_path)}: the store at {endpoint_of(storage_path)} did not answer for "
        f"{waited_s / 60:.1f} min; {reached}the checkpoints written before the outage stay there, and the same "
        "command resumes from the newest whole one once the store answers (or raise --store-wait-s)"
    )


def prune_checkpoints(storage_path: str, run_name: str, *, keep: int) -> list[str]:
    """Delete the run's checkpoint folders older than its newest `keep` (by step); the paths removed."""
    filesystem, root = (
        pafs.FileSystem.from_uri(storage_path) if "://" in storage_path else (pafs.LocalFileSystem(), storage_path)
    )
    selector = pafs.FileSelector(f"{root.rstrip('/')}/{run_name}", allow_not_found=True, recursive=True)
    folders = sorted(
        (info.path for info in filesystem.get_file_info(selector)
         if info.type == pafs.FileType.Directory and info.base_name.startswith(CHECKPOINT_PREFIX)),
        key=lambda path: path.rpartition("/")[2],
    )  # fmt: skip
    removed = folders[: max(0, len(folders) - keep)]
    for path in removed:
        filesystem.delete_dir(path)
    return removed
