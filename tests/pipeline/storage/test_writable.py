"""Unwritable places are refused before any work, in one line naming the path: a read-only tracking
store, storage path or output folder, a path under a file, a full disk."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from pipeline.cli.errors import UserError
from pipeline.storage.writable import check_local_store, check_writable_dir
from sweeps.study.config import StudyConfig
from sweeps.study.preflight import check_study_inputs
from tests.conftest import REPO_ROOT
from tests.support.unwritable import full_folder, read_only_folder, small_folder


def test_a_path_under_a_file_names_the_file(tmp_path):
    (tmp_path / "notes.txt").write_text("x")
    with pytest.raises(UserError, match=r"--storage-path .*notes.txt/runs: .*notes.txt is a file, not a directory"):
        check_writable_dir(tmp_path / "notes.txt" / "runs", what="--storage-path")
    with pytest.raises(UserError, match=r"--tracking-uri .*notes.txt/mlflow.db: .*is a file, not a directory"):
        check_local_store(f"sqlite:///{tmp_path / 'notes.txt' / 'mlflow.db'}")


def test_a_writable_folder_passes_and_is_left_as_it_was(tmp_path):
    check_writable_dir(tmp_path / "new" / "deeper", what="--output")
    check_local_store(f"sqlite:///{tmp_path / 'mlflow.db'}")
    assert list(tmp_path.iterdir()) == []  # nothing created, not even the missing folders


def test_a_read_only_folder_is_refused_for_every_kind_of_place(tmp_path):
    with read_only_folder(tmp_path) as folder:
        with pytest.raises(UserError, match=rf"--output {folder}/shards: cannot write in {folder}"):
            check_writable_dir(folder / "shards", what="--output")
        with pytest.raises(UserError, match=rf"--tracking-uri {folder}/x.db: cannot write in {folder}"):
            check_local_store(f"sqlite:///{folder}/x.db")
        config = StudyConfig(grid="mask_ratio", tracking_uri=f"sqlite:///{tmp_path}/ok.db", storage_path=str(folder))
        with pytest.raises(UserError, match=rf"--storage-path {folder}: cannot write"):
            check_study_inputs(config)


def test_a_full_disk_is_refused_before_any_work(tmp_path):
    with full_folder(tmp_path) as folder:
        if folder is None:
            pytest.skip("making a full filesystem needs root and tmpfs mounts")
        with pytest.raises(UserError, match=rf"--storage-path {folder}/runs: cannot write in {folder} \(No space left"):
            check_writable_dir(folder / "runs", what="--storage-path")


def test_pretrain_with_a_read_only_store_fails_in_one_line_within_seconds(tmp_path):
    """It used to retry for ~130 s and end in a 159-line SQLAlchemy traceback."""
    with read_only_folder(tmp_path) as folder:
        started = time.monotonic()
        done = subprocess.run(
            [sys.executable, "-m", "pipeline.pretrain", "--model", "mae-debug", "--steps", "2",
             "--tracking-uri", f"sqlite:///{folder}/mlflow.db", "--shards", str(tmp_path / "no-shards"),
             "--storage-path", str(tmp_path / "ray")],
            capture_output=True, text=True, timeout=120, cwd=REPO_ROOT,
            env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
        )  # fmt: skip
        elapsed = time.monotonic() - started
    assert done.returncode == 2, done.stderr[-2000:]
    assert "Traceback" not in done.stderr
    (line,) = [line for line in done.stderr.splitlines() if "error" in line]
    assert f"--tracking-uri {folder}/mlflow.db: cannot write in {folder}" in line
    assert elapsed < 60, elapsed


def test_prep_into_a_read_only_folder_fails_before_reading_any_input(tmp_path):
    from pipeline.prep.__main__ import main

    with read_only_folder(tmp_path) as folder:
        with pytest.raises(UserError, match=rf"--output {folder}/shards: cannot write in {folder}"):
            main(["--input", str(tmp_path / "never-listed"), "--output", str(folder / "shards")])


def test_a_disk_without_room_for_the_runs_checkpoints_is_refused(tmp_path):
    import shutil

    from pipeline.storage.writable import check_free_space

    free = shutil.disk_usage(tmp_path).free
    check_free_space(tmp_path / "runs", free // 2, what="--storage-path", why="this run")
    with pytest.raises(UserError, match=r"--storage-path .*/runs: [\d.]+ MB free, but this run keeps 9 .* needs about"):
        check_free_space(tmp_path / "runs", free + 10**9, what="--storage-path", why="this run keeps 9 checkpoints")


def test_pretrain_onto_a_small_disk_fails_before_training_not_at_a_checkpoint(tmp_path, tmp_path_factory):
    """On a 5 MB tmpfs a run failed after ~120 s with a 46-line traceback and a half-copied checkpoint."""
    from tests.support.pretrain_testdata import make_tiny_shards

    shards = make_tiny_shards(tmp_path_factory.getbasetemp(), preset_name="dasheng")  # shared with other tests
    with small_folder(tmp_path, "1m") as folder:  # room to write, not for 2 checkpoints of ~1.9 MB
        if folder is None:
            pytest.skip("making a small filesystem needs root and tmpfs mounts")
        done = subprocess.run(
            [sys.executable, "-m", "pipeline.pretrain", "--model", "mae-debug", "--steps", "4",
             "--shards", str(shards), "--storage-path", str(folder / "runs"),
             "--tracking-uri", f"sqlite:///{tmp_path / 'mlflow.db'}"],
            capture_output=True, text=True, timeout=300, cwd=REPO_ROOT,
            env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
        )  # fmt: skip
        assert done.returncode == 2, done.stderr[-2000:]
        (line,) = [line for line in done.stderr.splitlines() if "error" in line]
        assert f"--storage-path {folder}/runs" in line and "checkpoint(s) of about" in line, line
        assert not (folder / "runs").exists()  # nothing half written


def test_the_room_counts_every_checkpoint_on_the_disk_at_once(tmp_path):
    """Ray Train copies checkpoint K + 1 in before it deletes the oldest of K kept: a 5 MB disk
    counted for 2 failed at the third copy, minutes in, leaving it half written."""
    from pipeline.pretrain.config import PretrainConfig
    from pipeline.pretrain.driver import CHECKPOINT_BYTES_PER_PARAMETER, check_storage_room, checkpoints_at_once

    probe = PretrainConfig.from_flat(model_name="mae-debug")
    model = probe.describe_model()
    each = CHECKPOINT_BYTES_PER_PARAMETER * model.total_parameters
    with small_folder(tmp_path, f"{int(2.5 * each) // 1024}k") as folder:  # room for 2, not for 3
        if folder is None:
            pytest.skip("making a small filesystem needs root and tmpfs mounts")
        config = probe.replace(storage_path=str(folder / "runs"), num_checkpoints_to_keep=2)
        assert checkpoints_at_once(config) == 3  # the tmpfs is not the temporary folder's disk
        with pytest.raises(UserError, match=r"--storage-path .*/runs: .* up to 3 checkpoint\(s\) of about"):
            check_storage_room(config, model)
        check_storage_room(config.replace(num_checkpoints_to_keep=1), model)  # 2 fit
