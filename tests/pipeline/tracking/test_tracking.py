"""pipeline.tracking.runs against a real MLflow SQLite store.

One store serves the module (creating a SQLite store runs MLflow's migrations: seconds each);
every test uses its own experiment name.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline.tracking import runs as tracking


@pytest.fixture(scope="module")
def store_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("mlflow_store")


@pytest.fixture()
def tracking_uri(store_dir) -> str:
    return f"sqlite:///{store_dir / 'mlflow.db'}"


def test_default_uri_is_absolute_sqlite_under_audioscale_home(monkeypatch, tmp_path):
    monkeypatch.setenv("AUDIOSCALE_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    assert tracking.resolve_tracking_uri(None) == f"sqlite:///{tmp_path / 'home' / 'mlflow.db'}"


def test_relative_sqlite_and_bare_paths_become_absolute(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    assert tracking.resolve_tracking_uri("sqlite:///runs/x.db") == f"sqlite:///{tmp_path / 'runs' / 'x.db'}"
    assert tracking.resolve_tracking_uri("store") == f"sqlite:///{tmp_path / 'store' / 'mlflow.db'}"
    assert tracking.resolve_tracking_uri("a/b.db") == f"sqlite:///{tmp_path / 'a' / 'b.db'}"


def test_server_uris_pass_through():
    assert tracking.resolve_tracking_uri("http://127.0.0.1:5000") == "http://127.0.0.1:5000"


def test_code_version_is_this_checkouts_git_commit():
    tracking.code_version.cache_clear()  # cached per process; HEAD may have moved since the first call
    repo = Path(tracking.__file__).resolve().parents[2]
    sha = subprocess.run(["git", "-C", str(repo), "rev-parse", "--short=12", "HEAD"], capture_output=True, text=True)
    if sha.returncode != 0:
        pytest.skip("not a git checkout")
    assert tracking.code_version().startswith(f"git:{sha.stdout.strip()}")


def test_code_version_outside_git_is_package_version(tmp_path):
    # A copy of the package without .git, as `ray job submit --working-dir` ships it.
    repo = Path(tracking.__file__).resolve().parents[2]
    subprocess.run(["cp", "-r", str(repo / "pipeline"), str(tmp_path / "pipeline")], check=True)
    env = {k: v for k, v in os.environ.items() if k not in ("AUDIOSCALE_CODE_VERSION", "PYTHONPATH")}
    env["GIT_CEILING_DIRECTORIES"] = str(tmp_path.parent)
    out = subprocess.run(
        [sys.executable, "-c", "from pipeline.tracking.runs import code_version; print(code_version())"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    from pipeline import __version__

    assert out.stdout.strip() == f"audioscale=={__version__}"


def test_run_is_resumed_by_name_and_keeps_metric_history(tracking_uri):
    first = tracking.start_or_resume_run(tracking_uri=tracking_uri, experiment_name="resume", run_name="r1")
    first.log_params({"steps": 10, "model": "mae-debug", "overrides": {"depth": 2}})
    first.log_metrics({"loss": 2.0}, step=5)
    first.finish()
    again = tracking.start_or_resume_run(tracking_uri=tracking_uri, experiment_name="resume", run_name="r1")
    assert again.run_id == first.run_id
    again.log_params({"steps": 20, "model": "mae-debug"})
    again.log_metrics({"loss": 1.5}, step=15)
    run = tracking.read_run(tracking_uri, again.run_id)
    assert run["status"] == "RUNNING"
    assert run["params"] == {"steps": "10", "model": "mae-debug", "overrides": '{"depth": 2}'}
    assert run["tags"]["resumed_param.steps"] == "20"
    assert run["metrics"]["loss"] == [(5, 2.0), (15, 1.5)]
    assert run["tags"]["audioscale.code_version"] == tracking.code_version()


def test_different_names_give_different_runs(tracking_uri):
    a = tracking.start_or_resume_run(tracking_uri=tracking_uri, experiment_name="names", run_name="a")
    b = tracking.start_or_resume_run(tracking_uri=tracking_uri, experiment_name="names", run_name="b")
    assert a.run_id != b.run_id
    assert tracking.find_run_id(tracking_uri, "names", "missing") is None
    assert tracking.find_run_id(tracking_uri, "no-such-experiment", "a") is None


def test_sqlite_artifacts_land_beside_the_database_not_in_cwd(tracking_uri, store_dir, tmp_path, monkeypatch):
    cwd = tmp_path / "elsewhere"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    run = tracking.start_or_resume_run(tracking_uri=tracking_uri, experiment_name="artifacts", run_name="art")
    payload = tmp_path / "weights.txt"
    payload.write_text("w")
    run.log_artifact(payload, artifact_path="encoder")
    run.log_dict({"a": 1}, "summary.json")
    stored = list((store_dir / "mlartifacts").rglob("weights.txt"))
    assert len(stored) == 1 and stored[0].read_text() == "w"
    assert not list(cwd.iterdir())
    assert sorted(tracking.list_artifacts(tracking_uri, run.run_id)) == ["encoder", "summary.json"]


def test_child_run_points_at_its_parent(tracking_uri):
    parent = tracking.start_or_resume_run(tracking_uri=tracking_uri, experiment_name="study", run_name="p")
    child = tracking.start_or_resume_run(
        tracking_uri=tracking_uri, experiment_name="study", run_name="c", parent_run_id=parent.run_id
    )
    assert tracking.read_run(tracking_uri, child.run_id)["tags"]["mlflow.parentRunId"] == parent.run_id


def test_worker_handle_logs_into_the_same_run(tracking_uri):
    run = tracking.start_or_resume_run(tracking_uri=tracking_uri, experiment_name="worker", run_name="w")
    tracking.attach_run(tracking_uri, run.run_id).log_metrics({"rankme": 12.5, "lr": 1e-4}, step=3)
    metrics = tracking.read_run(tracking_uri, run.run_id)["metrics"]
    assert metrics == {"rankme": [(3, 12.5)], "lr": [(3, 1e-4)]}
