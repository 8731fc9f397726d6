"""A node preempted mid-run (drained with a deadline, then removed): the run finishes from the
checkpoint it wrote at the notice, with every step trained once. Runs preempted_pretrain.py in its
own process and Ray cluster (2 simulated nodes, then a replacement), apart from `ray_local`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline.checkpoint import read_checkpoint_meta, verify_checkpoint
from pipeline.tracking import runs as tracking
from tests.support.pretrain_testdata import make_tiny_shards

pytestmark = [pytest.mark.ray, pytest.mark.slow]

REPO_ROOT = Path(__file__).resolve().parents[3]
HOLD_STEP, STEPS = 5, 8  # as in preempted_pretrain.py


@pytest.fixture(scope="module")
def shards_dir(ray_local, tmp_path_factory) -> Path:
    return make_tiny_shards(tmp_path_factory.getbasetemp())


def _line(stdout: str, prefix: str) -> dict:
    return json.loads(stdout.split(prefix, 1)[1].splitlines()[0])


def test_a_preempted_node_costs_a_preemption_retry_and_resumes_from_the_notice_checkpoint(shards_dir, tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    env.update(
        PYTHONPATH=str(REPO_ROOT),
        RAY_AUTH_MODE="disabled",
        AUDIOSCALE_TEST_WAIT_FOR_PREEMPTION_AT_STEP=str(HOLD_STEP),
        AUDIOSCALE_TEST_PREEMPTION_DIR=str(tmp_path / "held"),
    )
    process = subprocess.Popen(
        [
            sys.executable,
            str(REPO_ROOT / "tests" / "support" / "preempted_pretrain.py"),
            str(shards_dir),
            str(tmp_path),
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        stdout, stderr = process.communicate(timeout=540)
    except subprocess.TimeoutExpired:
        process.terminate()  # the script shuts its simulated nodes down on SIGTERM
        stdout, stderr = process.communicate(timeout=120)
        pytest.fail("the preempted run did not finish in 540 s: " + stderr[-3000:])
    reclaim = _line(stdout, "RECLAIM ") if "RECLAIM " in stdout else {}
    assert process.returncode == 0, f"{reclaim}\n{stderr[-3000:]}"
    assert "error" not in reclaim and reclaim["removed"], reclaim
    assert reclaim["preemption_checkpoint_before_deadline"]
    assert len(set(reclaim["worker_nodes"])) == 2  # one worker on the preempted node, one on the head
    result = _line(stdout, "RESULT ")
    # --max-failures 0: the run could only finish because the loss was charged to --max-preemptions.
    assert result["steps"] == STEPS
    notice_checkpoint = tmp_path / "ray_results" / "preempted" / f"checkpoint_step_{HOLD_STEP:08d}"
    verify_checkpoint(notice_checkpoint)
    assert read_checkpoint_meta(notice_checkpoint)["step"] == HOLD_STEP
    # The notice checkpoint is a resume point, not a study point.
    assert [step for step, _ in result["checkpoints"]] == [STEPS]
    metrics = tracking.read_run(result["tracking_uri"], result["run_id"])["metrics"]
    assert metrics["resumed_from_step"] == [(0, 0.0), (HOLD_STEP, float(HOLD_STEP))]
    assert [step for step, _ in metrics["loss"]] == list(range(1, STEPS + 1))  # each step trained and logged once
