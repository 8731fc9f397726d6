"""Commands started together on a fresh SQLite store: MLflow's first-use table creation and the
find-or-create of a run name are serialised, so no process dies of the other's half-made schema
and one name is one run. Before, 4 processes started together failed with "table ... already
exists" (alembic) in 3 tries of 3."""

from __future__ import annotations

import multiprocessing
import time

import mlflow

from tests.conftest import REPO_ROOT

PROCESSES = 4


def _start_run(uri: str, start_at: float, results) -> None:
    import sys

    sys.path.insert(0, str(REPO_ROOT))
    from pipeline.tracking import runs as tracking
    from pipeline.tracking.lifecycle import RunInUseError

    while time.time() < start_at:  # every process reaches the store at the same moment
        time.sleep(0.001)
    try:
        tracking.start_or_resume_run(tracking_uri=uri, experiment_name="race", run_name="same-name")
        results.put("ok")
    except RunInUseError:
        results.put("in use")  # the run another live process just created: refused in one line
    except Exception as error:  # noqa: BLE001 - the test reports whatever else went wrong
        results.put(f"{type(error).__name__}: {str(error)[:300]}")


def test_processes_started_together_on_a_fresh_store_make_one_schema_and_one_run(tmp_path):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    context = multiprocessing.get_context("spawn")
    results = context.Queue()
    start_at = time.time() + 8  # after every spawned interpreter has imported mlflow
    processes = [context.Process(target=_start_run, args=(uri, start_at, results)) for _ in range(PROCESSES)]
    for process in processes:
        process.start()
    for process in processes:
        process.join(timeout=120)
    outcomes = sorted(results.get(timeout=5) for _ in processes)
    assert all(outcome in ("ok", "in use") for outcome in outcomes), outcomes
    assert "ok" in outcomes
    runs = mlflow.MlflowClient(uri).search_runs([mlflow.MlflowClient(uri).get_experiment_by_name("race").experiment_id])
    assert [run.info.run_name for run in runs] == ["same-name"]
