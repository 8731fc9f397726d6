"""Fixtures shared by every test package.

One local Ray instance serves the whole session: each `ray.init` costs seconds on 2 cores.
Tests that need a different cluster shape (several nodes, a `ray start --head` for job submission)
shut it down themselves or run in a subprocess.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]


def start_local_ray():
    """The suite's local Ray: 2 CPUs, no dashboard; its workers see this process's environment as it is now."""
    import ray

    # address="local" always starts a private instance, even if a `ray start --head` cluster
    # is running on this machine (a connect would reject num_cpus).
    ray.init(
        address="local",
        num_cpus=2,
        include_dashboard=False,
        log_to_driver=False,
        object_store_memory=512 * 1024**2,
        runtime_env={"env_vars": {"PYTHONPATH": str(REPO_ROOT)}},
    )
    return ray


@pytest.fixture(scope="session")
def ray_local():
    """A local Ray instance with 2 CPUs, started once; yields the `ray` module."""
    import ray

    if not ray.is_initialized():
        start_local_ray()
    yield ray


@pytest.fixture()
def tracking_uri(tmp_path: Path) -> str:
    """A fresh MLflow SQLite store under an absolute path, one per test."""
    return f"sqlite:///{tmp_path / 'mlflow.db'}"


@pytest.fixture(autouse=True)
def _isolated_home(tmp_path_factory, monkeypatch):
    """Keep the embedded defaults (`$AUDIOSCALE_HOME`) out of the user's home during tests."""
    if "AUDIOSCALE_HOME" not in os.environ or os.environ.get("AUDIOSCALE_TEST_KEEP_HOME") != "1":
        monkeypatch.setenv("AUDIOSCALE_HOME", str(tmp_path_factory.mktemp("audioscale_home")))


@pytest.fixture(scope="session")
def object_store(tmp_path_factory):
    """The cluster rehearsal's signed S3-compatible store on loopback (moto), started on first use."""
    from cluster.rehearsal.object_store import running_object_store

    with running_object_store(tmp_path_factory.mktemp("object-store")) as store:
        yield store


@pytest.fixture(scope="module")
def ray_with_bucket_env(object_store):
    """For a module whose Ray tasks read and write the bucket: the store's AWS variables set for the module,
    and the suite's local Ray restarted under them (a cluster's nodes have their credentials; the session's
    Ray started before the store's variables were set), then restarted as before for the modules after."""
    import ray

    with pytest.MonkeyPatch.context() as patch:
        for name, value in object_store.env().items():
            patch.setenv(name, value)
        ray.shutdown()
        start_local_ray()
        yield object_store
        ray.shutdown()
    start_local_ray()


@pytest.fixture()
def bucket_env(object_store, monkeypatch):
    """`object_store` with its admin's AWS variables set for this test (pyarrow reads them whenever it
    opens a URI)."""
    for name, value in object_store.env().items():
        monkeypatch.setenv(name, value)
    return object_store
