"""A study as a Ray job: `ray job submit` to a local `ray start --head`, logging to a real `mlflow server`.

The commands of cluster/README.md "Studies as jobs", run as a user runs them: the study is
submitted with the repository as `--working-dir` (the head has no PYTHONPATH: the job imports the
uploaded code), `ray job stop` ends it while a trial is in flight, and a second submission with
`--resume` finishes it. MLflow is the study's ledger: every trial must end with exactly one child
run, the one the stopped job left RUNNING included (taken over, not duplicated), and the finished
trials are not re-run. The CPU compute grid runs: 4 real trials of 25 to 200 steps on the tiny corpus
and tasks, one at a time on the head's 2 CPUs. The default mask_ratio grid (5 trials of 300 steps) made
the same checks in 406 s on 2 idle cores; the shortest trials keep the stop and the resubmission
the same at under half of the training.
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import mlflow
import pytest
from ray.job_submission import JobStatus, JobSubmissionClient

from pipeline.corpus.sources.pretrain_corpus import PretrainCorpusConfig, build_pretrain_corpus
from pipeline.corpus.tasks.build import TasksConfig, build_tasks
from pipeline.tracking import runs as tracking
from sweeps.record.keys import STATUS_OK, STATUS_TAG, STUDY_EXPERIMENT, child_run_name
from sweeps.study.grids import expand_grids
from tests.conftest import REPO_ROOT
from tests.support.mlflow_server import running_mlflow_server
from tests.support.ray_head import ray_subprocess_env, running_ray_head

pytestmark = [pytest.mark.ray, pytest.mark.slow]

GRID, STUDY = "compute", "job-steps"
STUDY_TIMEOUT_S = 1800  # the 4 trials left took 14 min on 2 busy cores; room for a busier machine
FIRST_TRIAL_TIMEOUT_S = 900  # the shards are built first, and the first trial fills the task-input cache


@pytest.fixture(scope="module")
def study_inputs(tmp_path_factory) -> tuple[Path, Path]:
    """The tiny default corpus (a few minutes of audio) and the tiny HEAR tasks: seconds to build."""
    root = tmp_path_factory.mktemp("study_inputs")
    build_pretrain_corpus(PretrainCorpusConfig(output_dir=root / "corpus", seed=0, tiny=True))
    build_tasks(TasksConfig(output_dir=root / "tasks", seed=0, tiny=True))
    return root / "corpus", root / "tasks"


def _submit(address: str, submission_id: str, study_args: list[str], env: dict[str, str], home: Path) -> None:
    # The job's own environment: this test's $AUDIOSCALE_HOME (shards, input cache), one thread per process.
    runtime_env = {"excludes": [".git"], "env_vars": {"AUDIOSCALE_HOME": str(home), "OMP_NUM_THREADS": "1"}}
    command = [
        "ray", "job", "submit", "--address", address, "--submission-id", submission_id, "--no-wait",
        "--working-dir", str(REPO_ROOT), "--runtime-env-json", json.dumps(runtime_env), "--",
        "python", "-m", "sweeps.scaling", *study_args,
    ]  # fmt: skip
    submitted = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert submitted.returncode == 0, submitted.stdout[-3000:] + submitted.stderr[-3000:]


def _experiment_runs(uri: str) -> list:
    """Every run of the studies' experiment (deleted runs aside), whatever its name."""
    client = mlflow.MlflowClient(uri)
    experiment = client.get_experiment_by_name(STUDY_EXPERIMENT)
    return [] if experiment is None else client.search_runs([experiment.experiment_id], max_results=1000)


def _study_runs(uri: str) -> tuple[list, list]:
    """(the study runs named STUDY, every child run of the experiment)."""
    runs = _experiment_runs(uri)
    parents = [run for run in runs if run.info.run_name == STUDY]
    return parents, [run for run in runs if "mlflow.parentRunId" in run.data.tags]


def _wait_for_a_finished_and_a_running_trial(uri: str, client: JobSubmissionClient, job: str) -> tuple[set, dict]:
    """Poll MLflow until one trial is done and the next one's child run is RUNNING (in flight)."""
    deadline = time.monotonic() + FIRST_TRIAL_TIMEOUT_S
    while True:
        _, children = _study_runs(uri)
        done = {run.info.run_name for run in children if run.data.tags.get(STATUS_TAG) == STATUS_OK}
        running = {run.info.run_name: run.info.run_id for run in children if run.info.status == "RUNNING"}
        if done and running:
            return done, running
        status = client.get_job_status(job)
        assert status in {JobStatus.PENDING, JobStatus.RUNNING}, (
            f"job {job} is {status}: {client.get_job_logs(job)[-3000:]}"
        )
        assert time.monotonic() < deadline, (
            f"no trial finished in {FIRST_TRIAL_TIMEOUT_S} s: " + client.get_job_logs(job)[-3000:]
        )
        time.sleep(2)


def _wait_for_end(client: JobSubmissionClient, job: str, timeout_s: float) -> JobStatus:
    deadline = time.monotonic() + timeout_s
    while (status := client.get_job_status(job)) not in {JobStatus.SUCCEEDED, JobStatus.FAILED, JobStatus.STOPPED}:
        assert time.monotonic() < deadline, (
            f"job {job} still {status} after {timeout_s} s: " + client.get_job_logs(job)[-3000:]
        )
        time.sleep(5)
    return status


def _stop_every_job(client: JobSubmissionClient) -> None:
    """On the way out, also after a failure: no study keeps running into the next test."""
    for job in client.list_jobs():
        if job.submission_id and not job.status.is_terminal():
            client.stop_job(job.submission_id)
            _wait_for_end(client, job.submission_id, 120)


# Both jobs and their waits, over pytest's default 600 s per test (pyproject).
@pytest.mark.timeout(FIRST_TRIAL_TIMEOUT_S + STUDY_TIMEOUT_S + 600)
def test_study_job_stopped_mid_study_finishes_on_resubmission_without_duplicate_runs(study_inputs, tmp_path):
    corpus, tasks = study_inputs
    env = ray_subprocess_env()
    env.pop("PYTHONPATH", None)  # the job must run the code it uploaded (--working-dir), not this checkout
    trials = expand_grids(GRID)
    with running_mlflow_server(tmp_path) as uri, running_ray_head(tmp_path, env=env) as address:
        client = JobSubmissionClient(address)
        study_args = [
            "--grid", GRID, "--study", STUDY, "--corpus", str(corpus), "--tasks", str(tasks),
            "--storage-path", str(tmp_path / "ray_results"), "--tracking-uri", uri,
            # No baselines: this test is about trials surviving a stop (tests/sweeps/study/test_study_baselines.py).
            "--eval-checkpoints", "final", "--n-bootstrap", "20", "--baselines", "none",
        ]  # fmt: skip
        try:
            _submit(address, "study-first", study_args, env, tmp_path / "home")
            _, in_flight = _wait_for_a_finished_and_a_running_trial(uri, client, "study-first")
            stopped = subprocess.run(["ray", "job", "stop", "--address", address, "study-first"], env=env,
                                     capture_output=True, text=True, timeout=300, check=False)  # fmt: skip
            assert stopped.returncode == 0, stopped.stderr[-3000:]
            assert _wait_for_end(client, "study-first", 120) == JobStatus.STOPPED
            after_stop = _study_runs(uri)[1]
            left_running = {run.info.run_name for run in after_stop if run.info.status == "RUNNING"}
            done_before = {run.info.run_name for run in after_stop if run.data.tags.get(STATUS_TAG) == STATUS_OK}

            _submit(address, "study-resumed", [*study_args, "--resume"], env, tmp_path / "home")
            status = _wait_for_end(client, "study-resumed", STUDY_TIMEOUT_S)
            logs = client.get_job_logs("study-resumed")
        finally:
            _stop_every_job(client)
        assert status == JobStatus.SUCCEEDED, logs[-5000:]
        parents, children = _study_runs(uri)

        # The stop left the in-flight trial's run RUNNING (its process was killed); the resumed study
        # ran only the trials not yet done.
        assert set(in_flight) <= left_running
        assert f"{STUDY}: {len(trials)} trials ({len(trials) - len(done_before)} to run)" in logs
        # One study run, one child run per trial: the stopped trial's run was taken over, not duplicated.
        assert len(parents) == 1 and parents[0].info.status == "FINISHED"
        assert len(_experiment_runs(uri)) == 1 + len(trials)  # nothing else was created
        names = [run.info.run_name for run in children]
        assert sorted(names) == sorted(child_run_name(STUDY, t.name) for t in trials), names
        assert all(run.data.tags["mlflow.parentRunId"] == parents[0].info.run_id for run in children)
        assert {run.info.status for run in children} == {"FINISHED"}
        assert {run.data.tags.get(STATUS_TAG) for run in children} == {STATUS_OK}
        by_name = {run.info.run_name: run.info.run_id for run in children}
        assert all(by_name[name] == run_id for name, run_id in in_flight.items())

        # The report and its figures come back through the server's artifact proxy.
        parent_id = parents[0].info.run_id
        listed = tracking.list_artifacts(uri, parent_id, "laws")
        assert {"laws/report.md", "laws/quality_vs_rankme.png"} <= set(listed), listed
        report = tracking.download_artifacts(uri, parent_id, "laws/report.md", tmp_path / "download")
        figure = tracking.download_artifacts(uri, parent_id, "laws/quality_vs_rankme.png", tmp_path / "download")
        text = report.read_text()
        assert text.startswith(f"# Scaling study `{STUDY}`")
        assert f"{len(trials)} finished trial rows were fitted" in text  # every trial, each once
        assert figure.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and figure.stat().st_size > 10_000
