"""A study stopped by Ctrl-C is marked KILLED (one left RUNNING by a dead process is taken over:
tests/sweeps/study/test_tune_driver.py)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from pipeline.tracking import runs as tracking
from sweeps.record.keys import STUDY_EXPERIMENT
from tests.conftest import REPO_ROOT

SYNTHETIC_RUNNER = "tests.support.synthetic_trials:run_synthetic_trial"
ENV = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}


def _settings(tmp_path) -> dict:
    return {"grid": "mask_ratio", "study_name": "masks", "tracking_uri": f"sqlite:///{tmp_path / 'mlflow.db'}",
            "storage_path": str(tmp_path / "ray"), "runner": SYNTHETIC_RUNNER, "prepare_shards": False,
            "n_bootstrap": 20}  # fmt: skip


# Ctrl-C, what a person stopping an interactive study sends; SIGTERM becomes SIGINT inside the same
# block (tests/pipeline/tracking/test_run_lifecycle.py checks both signals there and SIGTERM end to end).
@pytest.mark.slow
def test_ctrl_c_marks_the_study_run_killed(tmp_path):
    signum = signal.SIGINT
    (tmp_path / "ray").mkdir()
    (tmp_path / "ray" / "hold-seconds").write_text("120")
    code = (
        "import sys; from pipeline.cli.errors import run_cli; from sweeps.study.driver import StudyConfig, "
        f"run_study; sys.exit(run_cli(lambda argv: run_study(StudyConfig(**{_settings(tmp_path)!r})) and 0, 'study'))"
    )
    process = subprocess.Popen([sys.executable, "-c", code], env=ENV, cwd=REPO_ROOT, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 240
    while not (tmp_path / "ray" / "executions.txt").exists():  # a trial is running
        assert process.poll() is None and time.monotonic() < deadline, process.communicate()[1][-3000:]
        time.sleep(1)
    process.send_signal(signum)
    _, stderr = process.communicate(timeout=120)
    assert process.returncode == 130, stderr[-3000:]  # from the CLI edge
    assert "interrupted (run" in stderr and "marked KILLED" in stderr
    uri = _settings(tmp_path)["tracking_uri"]
    assert tracking.read_run(uri, tracking.find_run_id(uri, STUDY_EXPERIMENT, "masks"))["status"] == "KILLED"


@pytest.mark.parametrize("resume", [False, True])
def test_a_study_running_now_is_named_before_any_advice_to_resume(resume, tmp_path):
    """Starting a study a live process is running: the refusal says it runs now, with or without
    --resume (the plain "already exists; pass --resume" was wrong advice while it runs)."""
    from sweeps.study.config import StudyConfig
    from sweeps.study.driver import _open_study

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    code = (
        "from pipeline.tracking import runs as tracking; "
        f"tracking.start_or_resume_run(tracking_uri={uri!r}, experiment_name={STUDY_EXPERIMENT!r}, run_name='s'); "
        "print('started', flush=True); import time; time.sleep(600)"
    )
    holder = subprocess.Popen([sys.executable, "-c", code], cwd=REPO_ROOT, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "started"
        config = StudyConfig(grid="mask_ratio", study_name="s", tracking_uri=uri, resume=resume)
        with pytest.raises(ValueError, match=f"is running now in process .*:{holder.pid}:") as refused:
            _open_study(config, n_trials=1)
        assert "pass --resume" not in str(refused.value)
    finally:
        holder.kill()
        holder.wait()
