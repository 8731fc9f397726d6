"""A real `mlflow server` on 127.0.0.1 for the tests of tracking across nodes.

It is started as a cluster head starts it (cluster/ray-up, cluster/kuberay), minus basic auth: a
SQLite run database, and artifacts proxied by the server (`--serve-artifacts` into
`--artifacts-destination`), so clients upload and download through HTTP and share no filesystem.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

START_TIMEOUT_S = 120  # the first start creates the SQLite schema (MLflow's migrations): ~10 s on 2 cores


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@contextlib.contextmanager
def running_mlflow_server(root: Path) -> Iterator[str]:
    """`mlflow server` with its database in root/mlflow.db and artifacts in root/artifacts; yields its URI."""
    port = free_port()
    command = [
        sys.executable, "-m", "mlflow", "server", "--host", "127.0.0.1", "--port", str(port), "--workers", "1",
        "--backend-store-uri", f"sqlite:///{root / 'mlflow.db'}",
        "--serve-artifacts", "--artifacts-destination", str(root / "artifacts"),
    ]  # fmt: skip
    log_path = root / "mlflow-server.log"
    with open(log_path, "w") as log:
        # Its own session: `mlflow server` runs uvicorn in a child process, stopped with it as a group.
        server = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, cwd=root, start_new_session=True)
    uri = f"http://127.0.0.1:{port}"
    try:
        _wait_until_healthy(server, uri, log_path)
        yield uri
    finally:
        _stop_group(server)


def _stop_group(server: subprocess.Popen) -> None:
    os.killpg(server.pid, signal.SIGTERM)
    try:
        server.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(server.pid, signal.SIGKILL)
        server.wait()


def _wait_until_healthy(server: subprocess.Popen, uri: str, log_path: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while True:
        if server.poll() is not None:
            raise RuntimeError(f"mlflow server exited with {server.returncode}: {log_path.read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(f"{uri}/health", timeout=2) as response:
                if response.status == 200:
                    return
        except OSError:
            pass
        if time.monotonic() > deadline:
            raise RuntimeError(
                f"mlflow server did not answer {uri}/health in {START_TIMEOUT_S} s: {log_path.read_text()[-3000:]}"
            )
        time.sleep(0.5)
