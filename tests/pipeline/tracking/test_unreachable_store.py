"""A tracking server that is not there: every command that logs to MLflow says so in one line
within seconds, before its work (MLflow's client retries a dead server for minutes: pretrain used
to be silent 173 s, evaluate 150 s after scoring, laws 90 s and then a 102-line traceback). An
evaluation whose store stops answering keeps its scores on disk."""

from __future__ import annotations

import json
import math
import socket
import time

import pytest

from tests.pipeline.cli.test_errors import assert_one_line_error, run_cli
from tests.support.hear_task_fixtures import build_tiny_tasks
from tests.support.tiny_checkpoint import tiny_checkpoint


@pytest.fixture()
def dead_server(monkeypatch):
    """An http:// URI on a loopback port where nothing listens (bound, then closed)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    uri = f"http://127.0.0.1:{port}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    return uri


@pytest.fixture()
def checkpoint(tmp_path):
    return tiny_checkpoint(tmp_path / "ckpt", "mae-debug", step=1)


@pytest.mark.parametrize(
    ("module", "args"),
    [
        ("pipeline.pretrain", ["--model", "mae-debug", "--steps", "3"]),
        ("sweeps.laws", ["--study", "no-such-study"]),
        ("sweeps.advise", ["--study", "no-such-study", "--budget", "1e15"]),
    ],
)
def test_commands_refuse_a_dead_server_in_seconds(module, args, dead_server):
    started = time.monotonic()
    completed = run_cli(module, *args)
    assert time.monotonic() - started < 60, "the check must not wait for MLflow's retries"
    assert completed.returncode == 2 and "Traceback" not in completed.stderr, completed.stderr[-3000:]
    lines = [line for line in completed.stderr.splitlines() if "error" in line]
    assert len(lines) == 1 and dead_server in lines[0] and "cannot be opened" in lines[0], completed.stderr
    assert "Started a local Ray" not in completed.stderr


def test_evaluate_refuses_a_dead_server_before_scoring(dead_server, checkpoint, tmp_path):
    tasks = build_tiny_tasks(tmp_path / "tasks")
    completed = run_cli("pipeline.evaluate", "--checkpoint", str(checkpoint), "--tasks-dir", str(tasks))
    assert_one_line_error(completed, "$MLFLOW_TRACKING_URI", dead_server, "cannot be opened")
    assert "tones" not in completed.stdout, "no task may be scored before the store is known to answer"


def test_external_refuses_a_dead_server_before_scoring(dead_server, tmp_path):
    completed = run_cli(
        "sweeps.external",
        "--study",
        "no-such-study",
        "--hear-module",
        "tests.support.toy_hear_module",
        "--tasks-dir",
        str(tmp_path),
    )
    assert_one_line_error(completed, dead_server, "cannot be opened")


def test_evaluation_keeps_its_scores_when_the_store_stops_answering(dead_server, checkpoint, tmp_path, monkeypatch):
    """The up-front check passed, then the server went away: the scores are on disk and the error
    says where (the run under test is `_evaluate`, which main calls after the check)."""
    from pipeline.cli.errors import UserError
    from pipeline.evaluate.__main__ import _evaluate, parse_config, probe_training_from

    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")  # fail at once instead of minutes of retries
    tasks = build_tiny_tasks(tmp_path / "tasks")
    config, _ = parse_config(
        ["--checkpoint", str(checkpoint), "--tasks-dir", str(tasks), "--tasks", "tones", "--probe", "knn"]
    )
    with pytest.raises(UserError) as raised:
        _evaluate(config, checkpoint, probe_training_from(config), workers=1)
    results = checkpoint / "evaluation" / "evaluation.json"
    assert str(results) in str(raised.value) and dead_server in str(raised.value)
    saved = json.loads(results.read_text())
    assert "tones" in json.dumps(saved) and math.isfinite(saved["q"])


def test_evaluate_names_a_run_id_that_is_not_in_the_store(tmp_path, monkeypatch):
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    store = f"sqlite:///{tmp_path / 'mlflow.db'}"
    completed = run_cli("pipeline.evaluate", "--run-id", "deadbeef", "--tracking-uri", store)
    assert_one_line_error(completed, "--run-id deadbeef", "no such run", store)
