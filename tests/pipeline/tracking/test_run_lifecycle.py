"""Ctrl-C / SIGTERM mark a run KILLED; a run left RUNNING by a dead process is taken over, a live one refused."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from pipeline.tracking import runs as tracking
from pipeline.tracking.lifecycle import OWNER_TAG, RunInUseError, killed_on_interrupt
from tests.conftest import REPO_ROOT
from tests.support.pretrain_testdata import make_tiny_shards

ENV = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}


def _wait_for(predicate, timeout_s: float, process: subprocess.Popen):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"exited early: {process.communicate()[1][-3000:]}")
        value = predicate()
        if value:
            return value
        time.sleep(1)
    process.kill()
    raise AssertionError("timed out")


def _loss_logged(uri: str, experiment: str, run_name: str):
    try:
        run_id = tracking.find_run_id(uri, experiment, run_name)
    except Exception:  # the store is still being created by the other process
        return None
    return run_id if run_id and tracking.read_run(uri, run_id)["metrics"].get("loss") else None


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_either_signal_inside_the_block_marks_the_run_killed_and_restores_the_sigterm_handler(signum, tmp_path):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    run = tracking.start_or_resume_run(tracking_uri=uri, experiment_name="e", run_name="r")
    before = signal.getsignal(signal.SIGTERM)
    # Python's own Ctrl-C handler, as in a fresh CLI process (an earlier test in this process may have replaced it).
    previous_sigint = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(KeyboardInterrupt, match=f"run {run.run_id} marked KILLED"):
            with killed_on_interrupt(run):
                signal.raise_signal(signum)
                time.sleep(5)  # the handler interrupts this at once
    finally:
        signal.signal(signal.SIGINT, previous_sigint)
    assert tracking.read_run(uri, run.run_id)["status"] == "KILLED"
    assert signal.getsignal(signal.SIGTERM) is before


# End to end with SIGTERM only: the block turns SIGTERM into SIGINT (the test above), so this one run
# covers Ray Train's abort and the CLI's exit for both signals at the cost of one pretraining start.
def test_interrupted_pretraining_is_marked_killed(tmp_path, tmp_path_factory):
    signum = signal.SIGTERM
    shards = make_tiny_shards(tmp_path_factory.getbasetemp())
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    process = subprocess.Popen(
        [sys.executable, "-m", "pipeline.pretrain", "--shards", str(shards), "--override", "crop_frames=100",
         "--steps", "5000", "--batch-size", "4", "--rankme-every", "0", "--log-every", "1", "--run-name", "long",
         "--storage-path", str(tmp_path / "ray"), "--tracking-uri", uri],
        env=ENV, cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    run_id = _wait_for(lambda: _loss_logged(uri, "pretrain", "long"), 300, process)
    process.send_signal(signum)
    _, stderr = process.communicate(timeout=120)
    assert process.returncode == 130, stderr[-3000:]
    assert "Traceback" not in stderr and "interrupted" in stderr.splitlines()[-1]
    assert tracking.read_run(uri, run_id)["status"] == "KILLED"


def _start_in_subprocess(uri: str, run_name: str, *, hold: bool) -> subprocess.Popen:
    code = (
        "import sys, time; from pipeline.tracking import runs as tracking; "
        f"tracking.start_or_resume_run(tracking_uri={uri!r}, experiment_name='e', run_name={run_name!r}); "
        "print('started', flush=True); time.sleep(600 if sys.argv[1] == 'hold' else 0)"
    )
    process = subprocess.Popen(
        [sys.executable, "-c", code, "hold" if hold else "exit"],
        env=ENV,
        cwd=REPO_ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdout.readline().strip() == "started"
    return process


def test_run_left_running_by_a_dead_process_is_taken_over(tmp_path, capsys):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    _start_in_subprocess(uri, "r", hold=False).wait(timeout=60)
    run_id = tracking.find_run_id(uri, "e", "r")
    assert tracking.read_run(uri, run_id)["status"] == "RUNNING"  # what SIGKILL leaves behind
    run = tracking.start_or_resume_run(tracking_uri=uri, experiment_name="e", run_name="r")
    assert run.run_id == run_id and "taking it over" in capsys.readouterr().err
    assert str(os.getpid()) in tracking.read_run(uri, run_id)["tags"][OWNER_TAG]


def test_run_held_by_a_live_process_is_refused(tmp_path):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    holder = _start_in_subprocess(uri, "r", hold=True)
    try:
        with pytest.raises(RunInUseError, match=f"RUNNING in process .*:{holder.pid}:"):
            tracking.start_or_resume_run(tracking_uri=uri, experiment_name="e", run_name="r")
    finally:
        holder.kill()
        holder.wait()
