"""A store, a home or a tasks folder whose path runs through a file: one line naming the flag or the
variable, exit code 2, before Ray starts (mkdir used to end in FileExistsError's traceback)."""

from __future__ import annotations

import pytest

from tests.pipeline.cli.test_errors import assert_one_line_error, run_cli


@pytest.fixture()
def a_file(tmp_path, monkeypatch):
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    path = tmp_path / "a-file"
    path.write_text("not a folder\n")
    return path


def test_pretrain_store_under_a_file(a_file, tmp_path):
    completed = run_cli(
        "pipeline.pretrain",
        "--model",
        "mae-debug",
        "--steps",
        "3",
        "--shards",
        str(tmp_path / "shards"),
        "--tracking-uri",
        f"sqlite:///{a_file}/x.db",
    )
    assert_one_line_error(completed, "--tracking-uri", f"{a_file} is a file, not a directory")


@pytest.mark.parametrize(
    ("module", "args"),
    [
        ("pipeline.pretrain", ["--model", "mae-debug", "--steps", "3"]),
        ("sweeps.scaling", ["--grid", "mask_ratio"]),
    ],
)
def test_home_under_a_file(module, args, a_file, monkeypatch):
    monkeypatch.setenv("AUDIOSCALE_HOME", str(a_file))
    completed = run_cli(module, *args)
    assert_one_line_error(completed, "$AUDIOSCALE_HOME", f"{a_file} is a file, not a directory")


def test_scaling_store_under_a_file(a_file):
    completed = run_cli("sweeps.scaling", "--grid", "mask_ratio", "--tracking-uri", f"sqlite:///{a_file}/sub/x.db")
    assert_one_line_error(completed, "--tracking-uri", f"{a_file} is a file, not a directory")


def test_evaluate_does_not_advise_building_tasks_under_a_file(a_file, tmp_path, monkeypatch):
    from tests.support.tiny_checkpoint import tiny_checkpoint

    checkpoint = tiny_checkpoint(tmp_path / "ckpt", "mae-debug", step=1)
    monkeypatch.setenv("AUDIOSCALE_HOME", str(a_file))
    completed = run_cli("pipeline.evaluate", "--checkpoint", str(checkpoint), "--no-mlflow")
    assert_one_line_error(completed, f"{a_file} is a file, not a directory", "--tasks-dir")
    assert "build it with" not in completed.stderr
