"""The study driver's ledger under concurrency: a small `benchmarks/bench_study_driver_scale.py` run
against a real `mlflow server` (the 300-trial figures are in docs/performance.md), and the ledger check
it relies on, shown to catch a lost run, a lost or doubled metric step and a doubled run."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from mlflow.tracking import MlflowClient

from benchmarks import bench_study_driver_scale as bench
from pipeline.tracking import runs as tracking
from sweeps.record.keys import Q_METRIC, RANKME_METRIC, STATUS_OK, STATUS_TAG, STUDY_EXPERIMENT
from tests.conftest import REPO_ROOT

SCRIPT = REPO_ROOT / "benchmarks" / "bench_study_driver_scale.py"


# Each Tune trial is a fresh Ray worker that imports the driver (torch, MLflow, scikit-learn: ~6 s of
# CPU): the 5 mask ratios, 4 at once (1 waits for a slot), with Ray's and the server's start: ~60 s on 2 idle cores.
@pytest.mark.slow
def test_a_concurrent_study_logged_to_a_tracking_server_loses_and_duplicates_nothing(tmp_path):
    out = tmp_path / "figures.json"
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--trials", "5", "--max-concurrent", "4", "--auth", "basic",
         "--n-bootstrap", "5", "--quiet", "--json", str(out)],
        capture_output=True, text=True, timeout=600, cwd=REPO_ROOT,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr[-5000:]
    figures = json.loads(out.read_text())
    ledger = figures["ledger"]
    assert ledger["problems"] == []
    assert figures["trials"] == ledger["child_runs"] == ledger["distinct_run_names"] == 5
    assert ledger["metric_points"] == ledger["expected_metric_points"] == 5 * 5
    assert "nothing lost or duplicated" in done.stdout


def _child(uri: str, parent_id: str, spec, *, steps: dict[str, list[int]]) -> None:
    """A child run as the driver writes one; a second call for one trial makes a second run of that name."""
    client = MlflowClient(uri)
    experiment_id = client.get_experiment_by_name(STUDY_EXPERIMENT).experiment_id
    run_id = client.create_run(experiment_id, run_name=f"{spec.name}@{bench.STUDY}",
                               tags={"mlflow.parentRunId": parent_id}).info.run_id  # fmt: skip
    run = tracking.attach_run(uri, run_id)
    for key, key_steps in steps.items():
        for step in key_steps:
            run.log_metrics({key: 1.0}, step=step)
    run.set_tags({STATUS_TAG: STATUS_OK})
    run.finish()


def test_the_ledger_check_names_each_lost_or_doubled_run_and_metric_step(tracking_uri):
    _, trials = bench.study_trials(3)  # one seed: the 5 mask ratios
    parent = tracking.start_or_resume_run(tracking_uri=tracking_uri, experiment_name=STUDY_EXPERIMENT,
                                          run_name=bench.STUDY)  # fmt: skip
    complete = {key: sorted(steps) for key, steps in bench.expected_metric_steps(trials[0]).items()}
    last = trials[0].train_steps
    _child(tracking_uri, parent.run_id, trials[0], steps=complete)
    _child(tracking_uri, parent.run_id, trials[1], steps={**complete, RANKME_METRIC: [last]})  # step 10 lost
    _child(tracking_uri, parent.run_id, trials[2], steps={**complete, Q_METRIC: [last, last]})  # q twice
    _child(tracking_uri, parent.run_id, trials[3], steps=complete)
    _child(tracking_uri, parent.run_id, trials[3], steps=complete)  # the trial's run twice
    ledger = bench.check_ledger(tracking_uri, parent.run_id, trials, bench.STUDY)  # trials[4]: no run
    assert ledger["child_runs"] == 5 and ledger["distinct_run_names"] == 4
    assert sorted(ledger["problems"]) == sorted([
        f"run {trials[1].name}@{bench.STUDY}: {RANKME_METRIC} at step 10 missing",
        f"run {trials[2].name}@{bench.STUDY}: {Q_METRIC} at step {last} logged 2 times",
        f"run {trials[3].name}@{bench.STUDY} logged 2 times",
        f"run {trials[4].name}@{bench.STUDY} missing",
    ])  # fmt: skip
