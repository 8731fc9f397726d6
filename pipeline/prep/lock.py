"""One prep run at a time per output folder: an exclusive `flock` on a lock file inside it.

Two runs into one folder at once both wrote their part files and both finished with every row
twice. A second run now waits for the first, saying so and naming the holder's pid, then goes on
as usual: an identical run finds the first one's finished output and reuses it, a run with other
inputs or settings gets the ordinary conflict error. Waiting rather than failing because the common
case is benign: two commands (a pretraining run and a study, or two trials) building the same
embedded default shards at once, where both should succeed. flock is released by the kernel when
the process dies (kill -9 included), so a crashed run never leaves a stale lock behind.
"""

from __future__ import annotations

import contextlib
import datetime
import fcntl
import os
import socket
import sys
from collections.abc import Iterator
from pathlib import Path

from pipeline.prep.output import LOCK_NAME, OutputConflictError


class OutputLockError(OutputConflictError):
    """The output folder cannot be locked (not a folder, or not writable)."""


@contextlib.contextmanager
def output_lock(output_dir: Path, *, say=lambda line: print(line, file=sys.stderr)) -> Iterator[None]:
    """Hold the folder's prep lock (creating the folder) for the `with` block; waits for another holder."""
    if output_dir.exists() and not output_dir.is_dir():
        raise OutputLockError(f"--output {output_dir} exists and is not a directory")
    try:
        output_dir.mkdir(parents=True, exist_ok=True)
        handle = open(output_dir / LOCK_NAME, "a+", encoding="utf-8")
    except OSError as error:
        raise OutputLockError(f"--output {output_dir} cannot be locked for writing: {error}") from None
    with handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip() or "another process"
            say(
                f"prep: waiting for the prep run writing to {output_dir} ({holder}) to finish; "
                "it holds the folder's lock"
            )
            fcntl.flock(handle, fcntl.LOCK_EX)
        handle.seek(0)
        handle.truncate()
        started = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
        handle.write(f"pid {os.getpid()} on {socket.gethostname()}, since {started}\n")
        handle.flush()
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
