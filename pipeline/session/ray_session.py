"""The one way every stage connects to Ray: reuse, join a cluster, or start a private local one.

Policy, in order:
1. This process already runs Ray (a test fixture, a Tune trial, a caller's own `ray.init`): reuse it.
2. An address (`--address`, or $RAY_ADDRESS as `ray job submit` sets it): join that cluster. An
   explicit address ships the project's packages to the cluster's workers (`py_modules`), so a
   plain `--address` run needs no install there; inside `ray job submit` the job's own runtime
   environment (its `--working-dir`) already does that, so nothing is added.
3. Otherwise a new local instance (`address="local"`: never a `ray start` cluster that happens to
   run on this machine), with a capped object store (Ray's default takes 30% of RAM; the stages
   stream, they never hold a data set in it), no dashboard, every server on 127.0.0.1 only
   (`loopback_only`), and the repository on the workers' PYTHONPATH so they import the same code
   as the driver.

The auth mode comes from $RAY_AUTH_MODE, set once for every process by scripts/env.sh: mixed
modes on one machine fail with AuthenticationError (shared/reference/stack.md).
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import ray
from ray._private import ray_constants

from pipeline.cli.errors import UserError

REPO_ROOT = Path(__file__).resolve().parents[2]  # pipeline/session/ray_session.py -> the checkout
PACKAGES = ("pipeline", "models", "sweeps")
CLUSTER_SWITCH_ENV = ray_constants.ENABLE_RAY_CLUSTERS_ENV_VAR  # RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER


def local_object_store_bytes() -> int:
    """5% of RAM, at least 512 MiB (Ray's floor for a useful store), at most 4 GiB."""
    return int(max(512 * 1024**2, min(4 * 1024**3, 0.05 * psutil.virtual_memory().total)))


def connect_ray(address: str | None = None, *, num_cpus: int | None = None) -> bool:
    """Connect this process to Ray by the policy above; True when this call started it (the caller
    then shuts it down when done). `num_cpus` caps a new local instance (default: every core)."""
    if ray.is_initialized():
        return False
    if address:
        modules = [str(REPO_ROOT / package) for package in PACKAGES]
        ray.init(address=address, runtime_env={"py_modules": modules}, log_to_driver=False)
    elif os.environ.get("RAY_ADDRESS"):
        ray.init(log_to_driver=False)
    else:
        start_local_ray(num_cpus)
    return True


# Ray gives a starting node 30 s to register (ray/_private/node.py, not configurable): on a loaded 2-core
# machine that is sometimes not enough, though the same start succeeds moments later.
LOCAL_START_ATTEMPTS, LOCAL_START_PAUSE_S = 3, 10.0
STARTUP_TIMEOUT_TEXT = "timed out during startup"


def start_local_ray(num_cpus: int | None, *, say=lambda line: print(line, file=sys.stderr, flush=True)) -> None:
    """A private local instance (see the module docstring); a start that times out on a busy machine is
    tried again, and after LOCAL_START_ATTEMPTS ends in one line instead of Ray's traceback."""
    for attempt in range(1, LOCAL_START_ATTEMPTS + 1):
        try:
            with loopback_only():
                ray.init(
                    address="local",
                    num_cpus=num_cpus,
                    object_store_memory=local_object_store_bytes(),
                    include_dashboard=False,
                    log_to_driver=False,
                    runtime_env={"env_vars": {"PYTHONPATH": str(REPO_ROOT)}},
                )
            return
        except Exception as error:  # noqa: BLE001 - Ray raises a bare Exception for this one
            if STARTUP_TIMEOUT_TEXT not in str(error):
                raise
            ray.shutdown()  # what the half-started node left
            if attempt == LOCAL_START_ATTEMPTS:
                raise UserError(
                    f"a local Ray did not start: its node did not register within Ray's 30 s, {attempt} times "
                    "(the machine is busy: load average "
                    f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} cores); run the command again when it is less loaded"
                ) from None
            say(
                f"ray: the local Ray did not start within Ray's 30 s (a busy machine); trying again in {LOCAL_START_PAUSE_S:.0f} s"
            )
            time.sleep(LOCAL_START_PAUSE_S)


@contextlib.contextmanager
def loopback_only() -> Iterator[None]:
    """A local Ray started inside listens on 127.0.0.1 only, not on every interface.

    Ray gives a new node this host's outward IP (even for `_node_ip_address="127.0.0.1"`), and its
    GCS, raylet, agents and workers listen there and on the wildcard: with auth off, anyone who can
    reach the machine could run code as the user. With clusters switched off, as Ray does on
    Windows and macOS ($RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0, read at import, hence the constant
    too), the node IP is 127.0.0.1 and every server binds to loopback (checked by a test with psutil).
    """
    previous_env, previous = os.environ.get(CLUSTER_SWITCH_ENV), ray_constants.ENABLE_RAY_CLUSTER
    os.environ[CLUSTER_SWITCH_ENV] = "0"  # inherited by every process of the instance
    ray_constants.ENABLE_RAY_CLUSTER = False
    try:
        yield
    finally:
        ray_constants.ENABLE_RAY_CLUSTER = previous
        if previous_env is None:
            os.environ.pop(CLUSTER_SWITCH_ENV, None)
        else:
            os.environ[CLUSTER_SWITCH_ENV] = previous_env
