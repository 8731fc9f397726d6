"""`python -m sweeps.laws` on a study that did not finish says so, records it, and still fits what is
there (it used to exit 0 without a word about the trials that never ran)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from pipeline.tracking import runs as tracking
from sweeps.laws.forms import SaturatingLaw
from sweeps.record.keys import INCOMPLETE_TAG, N_TRIALS_PARAM
from sweeps.record.trial import TrialRecord
from tests.conftest import REPO_ROOT
from tests.support.study_runs import start_study_run, start_trial_run


def write_study(uri: str, *, planned: int, finished: int, status: str) -> str:
    parent = start_study_run(uri, "masks")
    parent.log_params({N_TRIALS_PARAM: planned, "grid": "mask_ratio", "profile": "cpu_default"})
    for ratio in [0.5, 0.6, 0.7, 0.8, 0.9][:finished]:
        rankme = 40.0 + 400.0 * ratio**2
        q = float(SaturatingLaw().predict({"q_inf": 0.7, "x_c": 15.0, "alpha": 0.8}, rankme))
        child = start_trial_run(uri, parent, "masks", f"mask{ratio:.2f}")
        TrialRecord(
            trial=f"mask{ratio:.2f}", model_name="mae-debug", arch="mae", n_params=1000, hours=3.0, flops=1e12,
            mask_ratio=ratio, rankme=rankme, rankme_by_step={300: rankme}, q=q, task_scores={"t": q},
        ).write(child)  # fmt: skip
        child.finish()
    parent.finish(status)
    return parent.run_id


def refit(uri: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "sweeps.laws", "--study", "masks", "--tracking-uri", uri, "--n-bootstrap", "0"],
        capture_output=True, text=True, timeout=300, env=env, cwd=REPO_ROOT,
    )  # fmt: skip


def test_a_killed_study_is_said_recorded_and_still_fitted(tmp_path):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    run_id = write_study(uri, planned=5, finished=3, status="KILLED")
    done = refit(uri)
    assert done.returncode == 0, done.stderr[-2000:]
    warnings = [line for line in done.stderr.splitlines() if "warning:" in line]
    assert len(warnings) == 1, done.stderr
    assert "study 'masks' is KILLED: 3 of its 5 planned trials finished" in warnings[0]
    assert "--resume" in warnings[0]
    run = tracking.read_run(uri, run_id)
    assert run["tags"][INCOMPLETE_TAG].startswith("study 'masks' is KILLED: 3 of its 5")
    assert "## Incomplete study" in done.stdout  # the report printed (and logged) says it too


@pytest.mark.parametrize(("planned", "status", "said"), [(5, "FINISHED", False), (5, "FAILED", True)])
def test_a_whole_study_refits_without_a_warning(tmp_path, planned, status, said):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    write_study(uri, planned=planned, finished=5, status=status)
    done = refit(uri)
    assert done.returncode == 0, done.stderr[-2000:]
    assert ("warning:" in done.stderr) == said, done.stderr
