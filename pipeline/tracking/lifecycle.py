"""A run's lifecycle beyond MLflow's own: who is writing it, and what an interrupt leaves behind.

Every run started or resumed through `pipeline.tracking.runs` carries the tag OWNER_TAG (host, pid and
start time of the writing process). A later start of the same run name refuses while that process
lives and takes the run over, saying so, once it is gone (killed with SIGKILL, crashed). Ctrl-C or
SIGTERM inside `killed_on_interrupt` marks the run KILLED instead of leaving it RUNNING.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import threading
from collections.abc import Iterator
from typing import Any

import psutil

OWNER_TAG = "audioscale.owner"  # host:pid:start time of the process writing the run


class RunInUseError(ValueError):
    """The run is RUNNING in a live process on this machine."""


def this_owner() -> str:
    """host:pid:start time of this process (the start time tells a reused pid apart)."""
    return f"{socket.gethostname()}:{os.getpid()}:{psutil.Process().create_time():.0f}"


def owner_alive(owner: str) -> bool:
    """Whether the process named by an owner tag still runs (on another host: assumed gone)."""
    host, _, rest = owner.partition(":")
    pid, _, started = rest.partition(":")
    if host != socket.gethostname() or not pid.isdigit():
        return False
    try:
        return f"{psutil.Process(int(pid)).create_time():.0f}" == started
    except psutil.Error:
        return False


@contextlib.contextmanager
def killed_on_interrupt(run: Any) -> Iterator[Any]:
    """Ctrl-C or SIGTERM inside the block marks `run` KILLED and raises KeyboardInterrupt.

    SIGTERM is handled as SIGINT, so Ray Train's graceful abort of a running fit() happens for both;
    that abort ends in `sys.exit(0)`, which is caught here too. Ray Tune's own SIGINT handler, which
    would end the trials quietly and let the study finish as if complete, is switched off."""
    in_main = threading.current_thread() is threading.main_thread()
    previous = signal.getsignal(signal.SIGTERM) if in_main else None
    if in_main:
        signal.signal(signal.SIGTERM, lambda signum, frame: signal.raise_signal(signal.SIGINT))
        os.environ["TUNE_DISABLE_SIGINT_HANDLER"] = "1"
    try:
        yield run
    except (KeyboardInterrupt, SystemExit) as interrupt:
        run.finish("KILLED")
        raise KeyboardInterrupt(f"run {run.run_id} marked KILLED") from interrupt
    finally:
        if in_main:
            signal.signal(signal.SIGTERM, previous)
