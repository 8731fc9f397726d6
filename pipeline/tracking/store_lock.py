"""One process at a time where a local SQLite store must not be raced (no MLflow import here).

MLflow creates a SQLite store's tables the first time a process opens it; two processes doing
that together fail with "table ... already exists" (an alembic error of ~70 lines), which two
commands started together on a fresh `$AUDIOSCALE_HOME` did every time in a 4-process test. And two
runs started together under one name would both find none and create two. Both steps run under an
exclusive `flock` on a file beside the database (the kernel drops the lock when a process dies, so
it is never stale). A tracking server serialises its own writes: no lock there.
"""

from __future__ import annotations

import contextlib
import fcntl
from collections.abc import Iterator
from pathlib import Path

LOCK_SUFFIX = ".audioscale-lock"


def sqlite_path(tracking_uri: str) -> Path | None:
    return Path(tracking_uri[len("sqlite:///") :]) if tracking_uri.startswith("sqlite:///") else None


@contextlib.contextmanager
def store_lock(tracking_uri: str) -> Iterator[None]:
    """Held by one process at a time per SQLite store; a no-op for any other store."""
    database = sqlite_path(tracking_uri)
    if database is None:
        yield
        return
    database.parent.mkdir(parents=True, exist_ok=True)
    with open(f"{database}{LOCK_SUFFIX}", "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
