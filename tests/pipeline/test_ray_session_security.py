"""The local Ray that connect_ray starts listens on loopback only (auth is off: no outside access)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from tests.conftest import REPO_ROOT

# Starts the local Ray the way every stage does, runs a task (so a worker process listens too) and
# lists the listening sockets of the driver and of every process whose command line names the
# session directory (GCS, raylet, agents, workers).
SCRIPT = """
import json, os, psutil, ray
from pipeline.ray_session import connect_ray
assert connect_ray(num_cpus=1)
ray.get(ray.remote(lambda: os.getpid()).remote())
session = ray._private.worker._global_node.get_session_dir_path()
listening = []
for process in psutil.process_iter(["pid", "cmdline", "name"]):
    if process.pid != os.getpid() and session not in " ".join(process.info["cmdline"] or []):
        continue
    try:
        sockets = process.net_connections(kind="inet")
    except psutil.Error:
        continue
    listening += [[process.info["name"], s.laddr.ip, s.laddr.port] for s in sockets if s.status == psutil.CONN_LISTEN]
ray.shutdown()
print(json.dumps(listening))
"""
LOOPBACK = {"127.0.0.1", "::1", "::ffff:127.0.0.1"}


def test_local_ray_listens_on_loopback_only():
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    env.pop("RAY_ADDRESS", None)
    completed = subprocess.run(
        [sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=300, env=env, cwd=REPO_ROOT
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    listening = json.loads(completed.stdout.strip().splitlines()[-1])
    names = {name for name, _, _ in listening}
    assert {"gcs_server", "raylet"} <= names, listening  # the check saw Ray's servers
    exposed = [entry for entry in listening if entry[1] not in LOOPBACK]
    assert not exposed, exposed
