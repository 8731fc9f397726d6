"""Every user error of a command line is one stderr line naming the flag or file, exit code 2."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch

from pipeline.checkpoint import WEIGHTS_FILE
from pipeline.cli import errors
from tests.conftest import REPO_ROOT
from tests.support.tiny_checkpoint import tiny_checkpoint


def run_cli(module: str, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    return subprocess.run(
        [sys.executable, "-m", module, *args], capture_output=True, text=True, timeout=timeout, env=env, cwd=REPO_ROOT
    )


def assert_one_line_error(completed: subprocess.CompletedProcess, *names: str) -> None:
    stderr_lines = [line for line in completed.stderr.splitlines() if line.strip()]
    errors = [line for line in stderr_lines if "error:" in line]
    assert completed.returncode == 2, completed.stderr[-2000:]
    assert "Traceback" not in completed.stderr, completed.stderr[-2000:]
    assert len(errors) == 1 and "Started a local Ray" not in completed.stderr, completed.stderr
    for name in names:
        assert name in errors[0], errors[0]


@pytest.mark.parametrize(
    ("args", "names"),
    [
        (["--steps", "0"], ["--steps"]),
        (["--batch-size", "0"], ["--batch-size"]),
        (["--mask-ratio", "1.5"], ["--mask-ratio"]),
        (["--model", "no-such-model"], ["--model", "no-such-model"]),
        (["--override", "encoder_depth=0"], ["--override", "encoder_depth"]),
        (["--rankme-n", "1"], ["--rankme-n", "at least 2"]),
        (["--warmup-steps", "-5"], ["--warmup-steps"]),
    ],
)
def test_pretrain_flag_errors_are_one_line_before_ray(args, names, tmp_path):
    completed = run_cli("pipeline.pretrain", *args, "--shards", str(tmp_path / "missing"))
    assert_one_line_error(completed, *names)


def test_debug_shows_the_traceback(tmp_path):
    completed = run_cli("pipeline.pretrain", "--steps", "0", "--debug")
    assert completed.returncode != 0 and "Traceback" in completed.stderr


def test_truncated_manifest_is_named(tmp_path):
    shards = tmp_path / "shards"
    shards.mkdir()
    (shards / "manifest.json").write_text(json.dumps({"preset": {"name": "audiomae"}, "n_mels": 128})[:20])
    completed = run_cli(
        "pipeline.pretrain",
        "--shards",
        str(shards),
        "--steps",
        "2",
        "--tracking-uri",
        f"sqlite:///{tmp_path / 'mlflow.db'}",
        "--storage-path",
        str(tmp_path / "ray"),
    )
    assert_one_line_error(completed, str(shards / "manifest.json"))


@pytest.fixture()
def checkpoint(tmp_path):
    return tiny_checkpoint(tmp_path / "ckpt")


@pytest.mark.parametrize(
    ("args", "names"),
    [(["--device", "cuda"], ["--device"]), (["--tasks", ","], ["--tasks"])],
)
def test_evaluate_flag_errors_are_one_line(args, names, checkpoint):
    if args[0] == "--device" and torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    completed = run_cli("pipeline.evaluate", "--checkpoint", str(checkpoint), "--no-mlflow", *args)
    assert_one_line_error(completed, *names)


def test_truncated_weights_are_named(checkpoint, tmp_path):
    from tests.support.hear_task_fixtures import build_tiny_tasks

    weights = checkpoint / WEIGHTS_FILE
    os.truncate(weights, weights.stat().st_size // 2)
    tasks_dir = build_tiny_tasks(tmp_path / "tasks")
    completed = run_cli(
        "pipeline.evaluate",
        "--checkpoint",
        str(checkpoint),
        "--tasks-dir",
        str(tasks_dir),
        "--tasks",
        "tones",
        "--probe",
        "linear",
        "--no-mlflow",
        "--workers",
        "1",
    )
    assert_one_line_error(completed, str(weights))


def test_scaling_max_concurrent_zero_is_refused(tmp_path):
    completed = run_cli(
        "sweeps.scaling",
        "--grid",
        "mask_ratio",
        "--max-concurrent",
        "0",
        "--tracking-uri",
        f"sqlite:///{tmp_path / 'mlflow.db'}",
    )
    assert_one_line_error(completed, "--max-concurrent")


def test_negative_numbers_in_exponent_form_are_values_not_flags():
    from pipeline.cli.errors import with_negative_values_attached

    assert with_negative_values_attached(["--budget", "-1e20", "--study", "s"]) == ["--budget=-1e20", "--study", "s"]
    assert with_negative_values_attached(["--lr", "-.5e-3", "--x", "-7"]) == ["--lr=-.5e-3", "--x=-7"]
    # not numbers, or already attached, or after a short flag: left as they were
    assert with_negative_values_attached(["--a=1", "-2e3", "-h", "--b", "-c"]) == ["--a=1", "-2e3", "-h", "--b", "-c"]


def test_a_store_failure_is_one_line_and_other_os_errors_are_not_hidden(capsys):
    """pyarrow's text for a store in trouble, raised from anywhere under a command: one line, exit code 2.
    Before, a store answering 500 during a listing ended prep in a 30-line traceback."""

    def store_fails(argv):
        raise OSError("When listing objects under key 'x': AWS Error INTERNAL_FAILURE during ListObjectsV2 operation")

    assert errors.run_cli(store_fails, "python -m pipeline.prep", []) == 2
    said = capsys.readouterr().err
    assert said.count("\n") == 1 and "the object store failed a request" in said and "ListObjectsV2" in said

    def disk_fails(argv):
        raise OSError(5, "Input/output error")

    with pytest.raises(OSError, match="Input/output error"):
        errors.run_cli(disk_fails, "python -m pipeline.prep", [])
