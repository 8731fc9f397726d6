"""Workers are sized to fit the cluster (2 workers on 2 CPUs train) and a size that cannot fit is refused."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from pipeline.pretrain.resources import check_workers_fit, default_worker_cpus
from tests.conftest import REPO_ROOT
from tests.support.pretrain_testdata import make_tiny_shards


@pytest.mark.parametrize("workers", [1, 2, 3])
def test_default_size_shares_two_cpus(workers):
    cpus = default_worker_cpus(workers, 2.0)
    assert cpus == (1.0 if workers == 1 else 2.0 / workers)  # one left to the driver when it can be
    check_workers_fit(workers, cpus, 2.0)


def test_whole_cpus_when_one_is_left_over():
    assert default_worker_cpus(2, 9.0) == 4.0  # (9 - 1) CPUs shared by 2 workers


def test_a_size_that_cannot_fit_is_refused_with_the_numbers():
    with pytest.raises(
        ValueError, match=r"--num-workers 2 x --cpus-per-worker 1.5 = 3 CPUs, but Ray has 2.*Fits: --cpus-per-worker 1 "
    ):
        check_workers_fit(2, 1.5, 2.0)
    check_workers_fit(2, 1.0, 2.0)  # the crop readers are threads of the workers: no CPU of their own


def _pretrain(tmp_path, shards, *args):
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    command = [
        sys.executable,
        "-m",
        "pipeline.pretrain",
        "--shards",
        str(shards),
        "--override",
        "crop_frames=100",
        "--steps",
        "4",
        "--batch-size",
        "4",
        "--rankme-every",
        "0",
        "--checkpoint-every",
        "4",
        "--warmup-steps",
        "1",
        "--run-name",
        "two",
        "--storage-path",
        str(tmp_path / "ray"),
        "--tracking-uri",
        f"sqlite:///{tmp_path / 'mlflow.db'}",
        *args,
    ]
    return subprocess.run(command, capture_output=True, text=True, timeout=420, env=env, cwd=REPO_ROOT)


def test_two_workers_on_the_local_ray_train_through_the_cli(tmp_path, tmp_path_factory):
    """On this 2-CPU machine the CLI's local Ray has 2 CPUs: 2 workers of 1 CPU used to hang forever."""
    shards = make_tiny_shards(tmp_path_factory.getbasetemp())
    completed = _pretrain(tmp_path, shards, "--num-workers", "2")
    assert completed.returncode == 0, completed.stderr[-3000:]
    assert "run two: 4 steps" in completed.stdout


def test_workers_that_cannot_fit_are_refused_before_training(tmp_path, tmp_path_factory):
    shards = make_tiny_shards(tmp_path_factory.getbasetemp())
    completed = _pretrain(tmp_path, shards, "--num-workers", "2", "--cpus-per-worker", "1000")
    assert completed.returncode == 2 and "Traceback" not in completed.stderr, completed.stderr[-3000:]
    (line,) = [line for line in completed.stderr.splitlines() if "error:" in line]
    assert "--num-workers 2 x --cpus-per-worker 1000" in line and "Fits: --cpus-per-worker" in line
