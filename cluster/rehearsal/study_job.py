"""The rehearsal's jobs on two Ray nodes (token authentication, every listener audited first: `ray_nodes`):
prep of audio held only in the bucket, as files and as tar shards (`prep_jobs`), then the study.

The study: `sweeps.scaling` submitted with `ray job submit` to two Ray nodes, its shards,
Ray storage and MLflow artifacts in the bucket, its runs on the tracking server, and the worker node
killed while a trial trains.

The head's CPUs are held by a placeholder actor until the kill, so the trials start on the worker
node (deterministically, not by the scheduler's choice); once the last trial has a checkpoint in the
bucket the placeholder goes and the worker node is killed with SIGKILL, as a machine that loses
power. Tune runs the lost trial again on the head, where its pretraining resumes from the bucket.
The job's $AUDIOSCALE_HOME is a path under a regular file, where nothing can be written (this runs
as root here, who ignores mode bits): the study must run with every input and output remote, its
optional task-input cache skipped with a note.

Then the study's products are checked through the server: one child run per trial, no metric step
logged twice, the report, figures and rankme_pool.json stored in the bucket, and the commands a user
runs on a finished study (`sweeps.laws`, `sweeps.advise`) work against it.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

from cluster.rehearsal.commands import REPO_ROOT, require_success
from cluster.rehearsal.prep_jobs import prep_on_two_nodes
from cluster.rehearsal.ray_nodes import TwoNodes, audit_listeners, job_client, ray_client_env, running_two_nodes
from cluster.rehearsal.stages import Rehearsal, RehearsalFailed, expect

T = TypeVar("T")

STUDY, GRID = "rehearsal-study", "compute"
STUDY_SHARDS_PATH, STUDY_RUNS_PATH = "study-shards", "study-runs"
# The head holds the rerun of the lost trial: its function (0.5 CPU) and Train worker (0.5), plus the
# lost attempt's Train placement group (0.5), which Ray 2.60 reschedules onto a surviving node and keeps
# until the job ends (its owner, the Train controller, died with the node; the group is the job's).
HEAD_CPUS, WORKER_CPUS = 2, 2
JOB_TIMEOUT_S = 1800
CHECKPOINT_TIMEOUT_S = 1200  # until the last trial has a checkpoint in the bucket (prep and 3 trials first)

# A placeholder that holds the head's CPUs: the trials can only start on the worker node.
_HOLD_HEAD = """
import sys, ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy
ray.init(address=sys.argv[1], log_to_driver=False)
head = next(n["NodeID"] for n in ray.nodes() if n["Alive"] and "node:__internal_head__" in n["Resources"])
@ray.remote
class Hold:
    def ready(self):
        return True
hold = Hold.options(num_cpus=float(sys.argv[2]), scheduling_strategy=NodeAffinitySchedulingStrategy(head, soft=False)).remote()
ray.get(hold.ready.remote())
print("holding", flush=True)
sys.stdin.read()
"""


def study_argv(rehearsal: Rehearsal) -> list[str]:
    """The study as cluster/README.md submits it: every input and output remote but the audio and task
    folders it reads (a cluster keeps those on the head or in the image)."""
    return ["python", "-m", "sweeps.scaling", "--grid", GRID, "--study", STUDY,
            "--corpus", str(rehearsal.audio_dir), "--tasks", str(rehearsal.tasks_dir),
            "--shards", rehearsal.store.uri(STUDY_SHARDS_PATH), "--storage-path", rehearsal.store.uri(STUDY_RUNS_PATH),
            "--tracking-uri", rehearsal.server.uri, "--eval-checkpoints", "final", "--baselines", "none",
            "--n-bootstrap", "20", "--max-concurrent", "1"]  # fmt: skip


def submit_argv(address: str, submission_id: str, job_env: dict[str, str], study: list[str]) -> list[str]:
    runtime_env = {"excludes": [".git", ".venv", "*.pyc"], "env_vars": job_env}
    return ["ray", "job", "submit", "--address", address, "--submission-id", submission_id, "--no-wait",
            "--working-dir", str(REPO_ROOT), "--runtime-env-json", json.dumps(runtime_env), "--", *study]  # fmt: skip


@contextlib.contextmanager
def _head_held(nodes: TwoNodes, cpus: int, log_dir: Path) -> Iterator[subprocess.Popen]:
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLD_HEAD, nodes.gcs, str(cpus)], env=ray_client_env(), cwd=log_dir,
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=open(log_dir / "hold-head.log", "w"), text=True,
    )  # fmt: skip
    try:
        expect(holder.stdout.readline().strip() == "holding", "the placeholder could not take the head's CPUs")
        yield holder
    finally:
        release(holder)


def release(holder: subprocess.Popen) -> None:
    if holder.poll() is None:
        holder.stdin.close()  # its driver exits; the placeholder actor dies with it
        holder.wait(timeout=60)


@contextlib.contextmanager
def _client_env(rehearsal: Rehearsal) -> Iterator[None]:
    """A cluster node's variables (the store's credentials, the tracking server's address and login) in
    this process's environment, for the MLflow and bucket clients here."""
    saved = dict(os.environ)
    os.environ.update(rehearsal.env())
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


def _job_status(nodes: TwoNodes, job: str) -> str:
    return str(job_client(nodes).get_job_status(job).value)


def _job_logs(nodes: TwoNodes, job: str) -> str:
    return job_client(nodes).get_job_logs(job)


def _trial_checkpoints(rehearsal: Rehearsal) -> dict[str, set[str]]:
    """Run name -> the checkpoint folders it has in the bucket."""
    found: dict[str, set[str]] = {}
    for key in rehearsal.store.keys(STUDY_RUNS_PATH + "/"):
        parts = key.split("/")
        for index, part in enumerate(parts):
            if part.startswith("checkpoint_step_") and index >= 1:
                found.setdefault(parts[index - 1], set()).add(part)
    return found


def _poll_the_running_job(nodes: TwoNodes, job: str, awaited: str, found: Callable[[], T | None], every_s: float) -> T:
    """found()'s first answer that is not None, checked every `every_s` while the job runs; a job that
    ends first, or CHECKPOINT_TIMEOUT_S without an answer, fails the rehearsal naming what was awaited."""
    deadline = time.monotonic() + CHECKPOINT_TIMEOUT_S
    while (answer := found()) is None:
        status = _job_status(nodes, job)
        if status not in ("RUNNING", "PENDING"):
            raise RehearsalFailed(f"the study job is {status} before {awaited}:\n{_job_logs(nodes, job)[-3000:]}")
        if time.monotonic() > deadline:
            raise RehearsalFailed(
                f"still waiting for {awaited} after {CHECKPOINT_TIMEOUT_S} s; the job's log ends:\n"
                f"{_job_logs(nodes, job)[-3000:]}"
            )
        time.sleep(every_s)
    return answer


def _wait_for_a_checkpoint_of(rehearsal: Rehearsal, nodes: TwoNodes, job: str, run_name: str) -> str:
    """The run's first checkpoint, once a second one appears: Ray Train registers a checkpoint only
    when its upload ends, and the step after it waits for that, so the first is then registered (a
    kill right after the first folder appeared once restarted the trial from step 0)."""

    def first_of_two() -> str | None:
        folders = _trial_checkpoints(rehearsal).get(run_name, set())
        return sorted(folders)[0] if len(folders) >= 2 else None

    return _poll_the_running_job(nodes, job, f"{run_name} checkpointed in the bucket", first_of_two, every_s=1)


def _wait_for_end(nodes: TwoNodes, job: str) -> str:
    deadline = time.monotonic() + JOB_TIMEOUT_S
    while (status := _job_status(nodes, job)) in ("RUNNING", "PENDING"):
        if time.monotonic() > deadline:
            raise RehearsalFailed(f"the study job is still {status} after {JOB_TIMEOUT_S} s")
        time.sleep(5)
    return status


def _submit(rehearsal: Rehearsal, nodes: TwoNodes, job: str, job_env: dict[str, str], node_env, *extra: str) -> None:
    submitted = subprocess.run(submit_argv(nodes.job_api, job, job_env, [*study_argv(rehearsal), *extra]),
                               env=node_env, capture_output=True, text=True, timeout=300, check=False)  # fmt: skip
    expect(submitted.returncode == 0, f"ray job submit failed: {submitted.stdout[-2000:]}{submitted.stderr[-2000:]}")


def _child_runs(rehearsal: Rehearsal) -> list:
    import mlflow

    from sweeps.record.keys import STUDY_EXPERIMENT

    client = mlflow.MlflowClient(rehearsal.server.uri)
    experiment = client.get_experiment_by_name(STUDY_EXPERIMENT)
    if experiment is None:
        return []
    runs = client.search_runs([experiment.experiment_id], max_results=1000)
    return [run for run in runs if "mlflow.parentRunId" in run.data.tags]


def _wait_for_a_finished_and_a_running_trial(rehearsal: Rehearsal, nodes: TwoNodes, job: str) -> tuple[set, dict]:
    from sweeps.record.keys import STATUS_OK, STATUS_TAG

    def finished_and_running() -> tuple[set, dict] | None:
        children = _child_runs(rehearsal)
        done = {run.info.run_name for run in children if run.data.tags.get(STATUS_TAG) == STATUS_OK}
        running = {run.info.run_name: run.info.run_id for run in children if run.info.status == "RUNNING"}
        return (done, running) if done and running else None

    return _poll_the_running_job(nodes, job, "a trial finished", finished_and_running, every_s=2)


def study_on_two_nodes(rehearsal: Rehearsal) -> dict:
    """Submit the study; stop the job once a trial is done and the next is in flight; submit it again
    with --resume; kill the worker node while the last trial trains; check what the study left."""
    from sweeps.study.grids import expand_grids  # the grid's trial names, as the job names them

    trials = expand_grids(GRID)
    last = f"{trials[-1].name}@{STUDY}"
    # $AUDIOSCALE_HOME under a regular file: nothing can be written there, even by root (who ignores
    # mode bits), so the job must run with every input and output remote.
    blocker = rehearsal.work / "read-only-home"
    blocker.write_text("the study job's $AUDIOSCALE_HOME is under this file: nothing can be written there\n")
    job_env = {"AUDIOSCALE_HOME": str(blocker / "audioscale"), "OMP_NUM_THREADS": "1"}
    node_env = ray_client_env(**rehearsal.env())
    node_env.pop("PYTHONPATH", None)  # the job runs the code it uploaded (--working-dir), not this checkout
    logs = rehearsal.work / "logs"
    started = time.monotonic()
    with running_two_nodes(logs, head_cpus=HEAD_CPUS, worker_cpus=WORKER_CPUS, env=node_env) as nodes:
        listened = audit_listeners(nodes)
        with _client_env(rehearsal):
            prepped = prep_on_two_nodes(rehearsal, nodes, node_env)
        # Another Ray on this machine (a test session's) makes Ray's own clients in the workers ask which.
        job_env["RAY_ADDRESS"] = nodes.gcs
        with _head_held(nodes, HEAD_CPUS, logs) as holder, _client_env(rehearsal):
            _submit(rehearsal, nodes, "study", job_env, node_env)
            done_before, in_flight = _wait_for_a_finished_and_a_running_trial(rehearsal, nodes, "study")
            stopped = subprocess.run(["ray", "job", "stop", "--address", nodes.job_api, "study"], env=node_env,
                                     capture_output=True, text=True, timeout=300, check=False)  # fmt: skip
            expect(stopped.returncode == 0, f"ray job stop failed: {stopped.stderr[-2000:]}")
            expect(_wait_for_end(nodes, "study") == "STOPPED", "the stopped study job did not end STOPPED")
            _submit(rehearsal, nodes, "study-resumed", job_env, node_env, "--resume")
            checkpoint = _wait_for_a_checkpoint_of(rehearsal, nodes, "study-resumed", last)
            release(holder)
            killed = nodes.kill_worker_node()
            killed_at = time.monotonic() - started
        status = _wait_for_end(nodes, "study-resumed")
        job_log = _job_logs(nodes, "study-resumed")
    (logs / "study-job.log").write_text(job_log)
    expect(
        status == "SUCCEEDED", f"the study job ended {status}; its log is {logs / 'study-job.log'}:\n{job_log[-3000:]}"
    )
    to_run = len(trials) - len(done_before)
    expect(
        f"{STUDY}: {len(trials)} trials ({to_run} to run)" in job_log, "the resumed job did not skip the done trials"
    )
    expect(f"trial {trials[-1].name} lost its process" in job_log, "the job did not say the trial lost its process")
    expect(blocker.is_file(), "the read-only home's blocking file is gone")
    with _client_env(rehearsal):
        facts = _check_ledger(rehearsal, trials, last, in_flight)
        facts |= _check_finished_study_commands(rehearsal)
    return {
        **listened,
        **prepped,
        "command": " ".join(study_argv(rehearsal)),
        "seconds": time.monotonic() - started,
        "trials": len(trials),
        "stopped": f"after {len(done_before)} trial(s), {', '.join(in_flight)} in flight; resubmitted with --resume",
        "killed": f"worker node ({killed} processes) at {killed_at:.0f} s, {last} past {checkpoint}",
        **facts,
    }


def _check_ledger(rehearsal: Rehearsal, trials, last: str, in_flight: dict[str, str]) -> dict:
    """One study run, one child per trial, each finished ok (the runs the stop left RUNNING taken over,
    not duplicated); no metric step logged twice; the lost trial resumed from its checkpoint; the
    report, figures and pool in the bucket."""
    import mlflow

    from sweeps.record.keys import STATUS_OK, STATUS_TAG, STUDY_EXPERIMENT

    client = mlflow.MlflowClient(rehearsal.server.uri)
    experiment = client.get_experiment_by_name(STUDY_EXPERIMENT)
    runs = client.search_runs([experiment.experiment_id], max_results=1000)
    parents = [run for run in runs if run.info.run_name == STUDY]
    children = [run for run in runs if "mlflow.parentRunId" in run.data.tags]
    expect(
        len(parents) == 1 and parents[0].info.status == "FINISHED", f"study runs: {[r.info.status for r in parents]}"
    )
    names = sorted(run.info.run_name for run in children)
    expect(names == sorted(f"{t.name}@{STUDY}" for t in trials), f"child runs: {names}")
    expect({run.data.tags.get(STATUS_TAG) for run in children} == {STATUS_OK}, "a trial did not finish ok")
    by_name = {run.info.run_name: run.info.run_id for run in children}
    expect(all(by_name[name] == run_id for name, run_id in in_flight.items()), "a stopped trial got a second run")
    steps_logged = 0
    for run in children:
        for key in ("loss", "rankme"):
            steps = [m.step for m in client.get_metric_history(run.info.run_id, key)]
            expect(len(steps) == len(set(steps)), f"{run.info.run_name}: {key} logged twice at some step: {steps}")
            steps_logged += len(steps)
    lost = next(run for run in children if run.info.run_name == last)
    resumed = [m.value for m in client.get_metric_history(lost.info.run_id, "resumed_from_step")]
    expect(any(value > 0 for value in resumed), f"{last} did not resume from a checkpoint: {resumed}")
    artifacts = rehearsal.store.keys("mlflow-artifacts/")
    stored = {key.rpartition("/")[2] for key in artifacts}
    expect(
        {"report.md", "quality_vs_rankme.png", "rankme_pool.json"} <= stored,
        f"artifacts in the bucket: {sorted(stored)[:20]}",
    )
    return {"child_runs": len(children), "metric_steps": steps_logged, "resumed_from": max(resumed)}


def _check_finished_study_commands(rehearsal: Rehearsal) -> dict:
    """What a user runs on a finished study, against the server: an outside model (the last trial's
    checkpoint through the HEAR API) as an external point, the laws refitted, the advisor asked."""
    from pipeline.storage.checkpoint_copy import local_checkpoint

    last_trial = max(_trial_checkpoints(rehearsal).items())  # (run name, its checkpoint folders)
    checkpoint = rehearsal.store.uri(f"{STUDY_RUNS_PATH}/{last_trial[0]}/{max(last_trial[1])}")
    with local_checkpoint(checkpoint) as local:
        external = require_success(rehearsal.run("external", [
            "python", "-m", "sweeps.external", "--hear-module", "pipeline.interop.hear_api", "--model-file", str(local),
            "--study", STUDY, "--probe", "knn", "--tasks-dir", str(rehearsal.tasks_dir), "--workers", "1",
            "--tracking-uri", rehearsal.server.uri, "--output", str(rehearsal.work / "external")]))  # fmt: skip
    expect(f"external point of study {STUDY}" in external.output, "sweeps.external logged no external point")
    advise = rehearsal.run("advise", ["python", "-m", "sweeps.advise", "--study", STUDY, "--budget", "1e12",
                                      "--tracking-uri", rehearsal.server.uri])  # fmt: skip
    # A compute grid has one model size: the advisor reads the study from the server and refuses in one line.
    refusal = advise.last_line("no advice")
    expect(advise.returncode == 2 and "distinct model sizes" in refusal, f"sweeps.advise: {advise.output[-1500:]}")
    laws = require_success(rehearsal.run("laws", ["python", "-m", "sweeps.laws", "--study", STUDY,
                                                  "--tracking-uri", rehearsal.server.uri, "--n-bootstrap", "20"]))  # fmt: skip
    expect(f"# Scaling study `{STUDY}`" in laws.output, "sweeps.laws printed no report")
    # The report's figure links are the server's artifact routes: each one, opened as a browser opens
    # it (the admin's login), must give the figure from the bucket.
    from pipeline.tracking import runs as tracking
    from sweeps.record.keys import STUDY_EXPERIMENT

    study_run = tracking.find_run_id(rehearsal.server.uri, STUDY_EXPERIMENT, STUDY)
    report = tracking.download_artifacts(rehearsal.server.uri, study_run, "laws/report.md", rehearsal.work / "download")
    linked = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", report.read_text())
    expect(bool(linked) and all(link.startswith(rehearsal.server.uri) for link in linked), f"figure links: {linked}")
    for link in linked:
        expect(_fetch(link, rehearsal)[:8] == b"\x89PNG\r\n\x1a\n", f"{link}, linked from the report, is not a PNG")
    return {"external_s": external.seconds, "browser": _browser_check(rehearsal), "advise": refusal.split(": ", 1)[-1][:80], "laws_refit_s": laws.seconds,
            "figures_linked": len(linked)}  # fmt: skip


def _fetch(url: str, rehearsal: Rehearsal) -> bytes:
    login = base64.b64encode(f"admin:{rehearsal.server.password}".encode()).decode()
    request = urllib.request.Request(url, headers={"Authorization": f"Basic {login}"})
    with urllib.request.urlopen(request, timeout=60) as response:
        return response.read()


def _browser_check(rehearsal: Rehearsal) -> str:
    """The study's printed MLflow view opened in headless Chromium against the server (the runs table,
    the report's figures), when Chromium is installed (`scripts/check_mlflow_view.py`)."""
    if shutil.which("chromium") is None and shutil.which("chromium-browser") is None:
        return "not run (no chromium on PATH)"
    looked = require_success(rehearsal.run("browser", ["python", "scripts/check_mlflow_view.py", "--server",
                                                       rehearsal.server.uri, "--study", STUDY,
                                                       "--out", str(rehearsal.work / "view")]))  # fmt: skip
    return looked.last_line("ok ").strip()[:120]
