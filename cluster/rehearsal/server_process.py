"""A server the rehearsal runs as a child process: started in its own process group with its output
in a log file, waited for until it answers, and stopped with everything it started."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path


def start_server(
    command: list[str], log_path: Path, *, env: dict[str, str], cwd: Path | None = None
) -> subprocess.Popen:
    # Its own session: a server may run workers in child processes (uvicorn), stopped with it as a group.
    with open(log_path, "w") as log:
        return subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=cwd, start_new_session=True)


def wait_until_ready(
    server: subprocess.Popen, ready: Callable[[], bool], *, what: str, log_path: Path, timeout_s: float
) -> None:
    """Poll `ready()` (an OSError counts as not ready) until it is true; raise with the log's tail
    when the server exits or `timeout_s` passes."""
    deadline = time.monotonic() + timeout_s
    while True:
        if server.poll() is not None:
            raise RuntimeError(f"{what} exited with {server.returncode}: {log_path.read_text()[-3000:]}")
        try:
            if ready():
                return
        except OSError:
            pass
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what} was not ready in {timeout_s:.0f} s: {log_path.read_text()[-3000:]}")
        time.sleep(0.2)


def stop_group(server: subprocess.Popen) -> None:
    if server.poll() is not None:
        return  # exited already (a failed start): its error is in the log
    os.killpg(server.pid, signal.SIGTERM)
    try:
        server.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(server.pid, signal.SIGKILL)
        server.wait()
