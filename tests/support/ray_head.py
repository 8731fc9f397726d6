"""A private `ray start --head` for the tests of `ray job submit`, apart from the session's `ray_local`.

Every port is a free one and the temp dir is its own, so it cannot join or disturb another Ray on
the machine (other engineers' sessions included). It is stopped by signalling its own `--block`
process only: a `ray stop` would stop every Ray instance on the machine.

Its own short --temp-dir also keeps `ray_current_cluster` out of /tmp/ray: left there after the
head stops, it makes every later `ray.init(num_cpus=...)` on the machine try to join it.
With clusters switched off ($RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0, as pipeline.session.ray_session does for
its own local Ray) the node's IP is 127.0.0.1, so nothing listens outward; its clients use the head's
auth mode (token by default, `cluster.rehearsal.ray_nodes.ray_client_env`).
"""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import psutil

from cluster.rehearsal.ray_nodes import free_ports, ray_client_env

START_TIMEOUT_S = 120  # the dashboard's job API answers ~10-20 s after the start on 2 busy cores
STOP_TIMEOUT_S = 60
GRACE_S = 5  # a head that ran no Ray Train job stops in ~2 s


def ray_subprocess_env(**extra: str) -> dict[str, str]:
    """This environment without $RAY_ADDRESS (it would point the clients elsewhere), with the token of this
    process's Ray nodes."""
    return ray_client_env(**extra)


@contextlib.contextmanager
def running_ray_head(log_dir: Path, *, num_cpus: int = 2, env: dict[str, str] | None = None) -> Iterator[str]:
    """`ray start --head --block` with `num_cpus`; yields the job API address http://127.0.0.1:<port>.

    `env` (default: ray_subprocess_env()) is the head's environment, which submitted jobs inherit."""
    gcs, dashboard, agent, agent_grpc, metrics, client, runtime_env = free_ports(7)
    temp_dir = tempfile.mkdtemp(prefix="rayhead-", dir="/tmp")  # short: Unix socket paths are capped
    command = [
        "ray", "start", "--head", "--block", "--disable-usage-stats", f"--temp-dir={temp_dir}",
        f"--port={gcs}", f"--num-cpus={num_cpus}", f"--object-store-memory={512 * 1024**2}",
        "--include-dashboard=true", "--dashboard-host=127.0.0.1", f"--dashboard-port={dashboard}",
        f"--dashboard-agent-listen-port={agent}", f"--dashboard-agent-grpc-port={agent_grpc}",
        f"--metrics-export-port={metrics}", f"--ray-client-server-port={client}",
        f"--runtime-env-agent-port={runtime_env}",
    ]  # fmt: skip
    head_env = {**(env or ray_subprocess_env()), "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"}
    log_path = log_dir / "ray-head.log"
    with open(log_path, "w") as log:
        head = subprocess.Popen(command, env=head_env, stdout=log, stderr=subprocess.STDOUT)
    address = f"http://127.0.0.1:{dashboard}"
    try:
        _wait_for_job_api(head, address, log_path, head_env)
        yield address
    finally:
        _stop_head(head, temp_dir)
        shutil.rmtree(temp_dir, ignore_errors=True)


def _stop_head(head: subprocess.Popen, temp_dir: str) -> None:
    """SIGTERM to `--block`, which stops the head's processes; whatever is left after GRACE_S is killed.

    After a Ray Train job the graceful stop takes ~30 s (measured: 31.7 s, against 2 s after a plain
    job), all of it waiting on processes nothing will read again: the head's descendants are listed
    first, so each one can be killed, the Train workers the raylet started included."""
    descendants: list[psutil.Process] = []
    with contextlib.suppress(psutil.Error):  # a head that already exited has none to list
        descendants = psutil.Process(head.pid).children(recursive=True)
    head.terminate()
    try:
        head.wait(timeout=GRACE_S)
    except subprocess.TimeoutExpired:
        for process in [*descendants, psutil.Process(head.pid)]:
            with contextlib.suppress(psutil.Error):
                process.kill()
        head.wait(timeout=STOP_TIMEOUT_S)
    for process in descendants:
        with contextlib.suppress(psutil.Error):
            process.kill()  # a `--block` stop that returned in time can still leave a worker behind
    _kill_leftovers(temp_dir)


def _kill_leftovers(temp_dir: str) -> None:
    """Kill what outlived the head: its GCS, raylet and dashboard name the temp dir on their
    command lines (seen surviving a SIGTERM to a daemonised `ray start`); nothing else does."""
    for process in psutil.process_iter(["pid", "cmdline"]):
        if temp_dir in " ".join(process.info["cmdline"] or []):
            with contextlib.suppress(psutil.Error):
                process.kill()


def _wait_for_job_api(head: subprocess.Popen, address: str, log_path: Path, env: dict[str, str]) -> None:
    """The job API answers a client in the head's own auth mode."""
    deadline = time.monotonic() + START_TIMEOUT_S
    while subprocess.run(["ray", "job", "list", "--address", address], env=env,
                         capture_output=True, check=False).returncode != 0:  # fmt: skip
        if head.poll() is not None:
            raise RuntimeError(f"ray start exited with {head.returncode}: {log_path.read_text()[-3000:]}")
        if time.monotonic() > deadline:
            raise RuntimeError(
                f"the Ray head did not serve the job API at {address} in {START_TIMEOUT_S} s: "
                f"{log_path.read_text()[-3000:]}"
            )
        time.sleep(2)
