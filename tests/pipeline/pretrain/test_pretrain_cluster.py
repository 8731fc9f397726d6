"""Pretraining across nodes: a simulated 2-node cluster, and `ray job submit` to a local head.

Both run in their own processes / Ray clusters, apart from the session's `ray_local`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from ray.job_submission import JobStatus, JobSubmissionClient

from pipeline.checkpoint import read_checkpoint_meta
from pipeline.tracking import runs as tracking
from tests.support.pretrain_testdata import make_tiny_shards
from tests.support.ray_head import running_ray_head

pytestmark = pytest.mark.ray

REPO_ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def shards_dir(ray_local, tmp_path_factory) -> Path:
    return make_tiny_shards(tmp_path_factory.getbasetemp())


def _subprocess_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    env.update(PYTHONPATH=str(REPO_ROOT), RAY_AUTH_MODE="disabled", **extra)
    return env


def test_two_nodes_keep_ranks_identical_on_disjoint_data(shards_dir, tmp_path):
    record_dir = tmp_path / "record"
    process = subprocess.Popen(
        [
            sys.executable,
            str(REPO_ROOT / "tests" / "support" / "multinode_pretrain.py"),
            str(shards_dir),
            str(tmp_path),
        ],
        env=_subprocess_env(AUDIOSCALE_TEST_RECORD_CROPS_DIR=str(record_dir)),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        stdout, stderr = process.communicate(timeout=540)
    except subprocess.TimeoutExpired:
        process.terminate()  # the script shuts its simulated nodes down on SIGTERM
        stdout, stderr = process.communicate(timeout=120)
        pytest.fail("multi-node pretraining did not finish in 540 s: " + stderr[-3000:])
    assert process.returncode == 0, stderr[-3000:]
    result = json.loads(stdout.split("RESULT ", 1)[1].splitlines()[0])
    assert result["steps"] == 4
    nodes = [(record_dir / f"node-{rank}.txt").read_text() for rank in (0, 1)]
    assert nodes[0] != nodes[1], "both workers ran on one node"
    weights = [(record_dir / f"weights-{rank}.txt").read_text() for rank in (0, 1)]
    assert weights[0] == weights[1]
    crops = [
        [line.split()[1] for line in (record_dir / f"rank-{rank}.txt").read_text().splitlines()] for rank in (0, 1)
    ]
    # 4 steps x 4 crops per worker, all distinct, none shared between the workers.
    assert [len(c) for c in crops] == [16, 16]
    assert len(set(crops[0]) | set(crops[1])) == 32


@pytest.fixture()
def ray_head(tmp_path):
    """A private `ray start --head` on free ports (tests/support/ray_head.py), stopped after the test."""
    with running_ray_head(tmp_path, env=_subprocess_env()) as address:
        yield address


def test_ray_job_submit_runs_pretraining_to_a_checkpoint(ray_head, shards_dir, tmp_path):
    runtime_env = {"excludes": [".git"], "env_vars": {"AUDIOSCALE_HOME": str(tmp_path / "home")}}
    submit = subprocess.run(
        [
            "ray",
            "job",
            "submit",
            "--address",
            ray_head,
            "--submission-id",
            "pretrain-job-test",
            "--working-dir",
            str(REPO_ROOT),
            "--runtime-env-json",
            json.dumps(runtime_env),
            "--",
            "python",
            "-m",
            "pipeline.pretrain",
            "--model",
            "audiomae++-debug",
            "--override",
            "crop_frames=100",
            "--shards",
            str(shards_dir),
            "--steps",
            "4",
            "--batch-size",
            "8",
            "--num-workers",
            "2",
            "--cpus-per-worker",
            "0.5",
            "--lr",
            "0.1",
            "--run-name",
            "submitted",
            "--checkpoint-every",
            "4",
            "--rankme-every",
            "0",
            "--storage-path",
            str(tmp_path / "ray_results"),
            "--tracking-uri",
            f"sqlite:///{tmp_path / 'mlflow.db'}",
        ],
        env=_subprocess_env(),
        capture_output=True,
        text=True,
        timeout=540,
    )
    assert submit.returncode == 0, submit.stdout[-3000:] + submit.stderr[-2000:]
    assert JobSubmissionClient(ray_head).get_job_status("pretrain-job-test") == JobStatus.SUCCEEDED
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    run_id = tracking.find_run_id(uri, "pretrain", "submitted")
    assert run_id is not None and tracking.read_run(uri, run_id)["status"] == "FINISHED"
    checkpoint = tmp_path / "ray_results" / "submitted" / "checkpoint_step_00000004"
    assert read_checkpoint_meta(checkpoint)["step"] == 4
    assert f"checkpoint: {checkpoint}" in submit.stdout
