"""A resumed run keeps the settings of its checkpoint (or is told to allow a change) and logs each step once."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from pipeline.cli.errors import UserError
from pipeline.pretrain.driver import PretrainConfig, run_pretraining
from pipeline.tracking import runs as tracking
from tests.support.pretrain_testdata import make_tiny_shards

pytestmark = [pytest.mark.ray, pytest.mark.slow]  # ~95 s: -m 'not slow' runs the fast subset (docs/testing.md)


@pytest.fixture(scope="module")
def shards_dir(ray_local, tmp_path_factory) -> Path:
    return make_tiny_shards(tmp_path_factory.getbasetemp())


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("resume")


def small_config(shards_dir: Path, workdir: Path, **changes) -> PretrainConfig:
    settings = dict(
        model_name="audiomae++-debug", model_overrides={"crop_frames": 100}, shards_dir=str(shards_dir), steps=6,
        global_batch_size=4, num_workers=1, cpus_per_worker=1.0, base_lr=0.1, log_every_steps=2,
        checkpoint_every_steps=3, rankme_every_steps=3, rankme_n=16, run_name="resume",
        storage_path=str(workdir / "ray_results"), tracking_uri=f"sqlite:///{workdir / 'mlflow.db'}",
    )  # fmt: skip
    return PretrainConfig.from_flat(**{**settings, **changes})


@pytest.fixture(scope="module")
def first_run(shards_dir, workdir):
    return run_pretraining(small_config(shards_dir, workdir))


def test_resume_with_another_lr_is_refused_listing_the_difference(first_run, shards_dir, workdir):
    with pytest.raises(UserError, match=r"--lr 0.1 -> 0.2.*--allow-changed lr"):
        run_pretraining(small_config(shards_dir, workdir, steps=8, base_lr=0.2))


def test_allowed_change_is_recorded_and_each_step_logged_once(first_run, shards_dir, workdir):
    result = run_pretraining(small_config(shards_dir, workdir, steps=9, base_lr=0.2, allow_changed=("lr",)))
    assert result.run_id == first_run.run_id and result.steps == 9
    run = tracking.read_run(result.tracking_uri, result.run_id)
    assert run["tags"]["resume_allowed_changes"] == "--lr 0.1 -> 0.2"
    for key, history in run["metrics"].items():
        assert not _repeated_steps(history), (key, history)


def _repeated_steps(history):
    return [step for step, count in Counter(step for step, _ in history).items() if count > 1]


def test_restart_after_a_crash_logs_each_step_once(shards_dir, workdir, monkeypatch):
    """The worker dies after step 5; the restart from the step-3 checkpoint replays step 4 (logged before)."""
    monkeypatch.setenv("AUDIOSCALE_TEST_CRASH_AT_STEP", "5")
    monkeypatch.setenv("AUDIOSCALE_TEST_CRASH_RANK", "0")
    monkeypatch.setenv("AUDIOSCALE_TEST_CRASH_MARKER", str(workdir / "crashed.marker"))
    result = run_pretraining(small_config(shards_dir, workdir, run_name="crash", max_failures=1))
    assert (workdir / "crashed.marker").is_file() and result.steps == 6
    run = tracking.read_run(result.tracking_uri, result.run_id)
    assert [step for step, _ in run["metrics"]["loss"]] == [2, 3, 4, 6]
    for key, history in run["metrics"].items():
        assert not _repeated_steps(history), (key, history)


def test_a_restart_before_the_first_checkpoint_logs_each_step_once(shards_dir, workdir, monkeypatch):
    """The worker dies after step 2, before any checkpoint: the restart begins again at step 0, whose
    RankMe and start were logged by the first attempt (a study's trial stopped early did this)."""
    monkeypatch.setenv("AUDIOSCALE_TEST_CRASH_AT_STEP", "2")
    monkeypatch.setenv("AUDIOSCALE_TEST_CRASH_RANK", "0")
    monkeypatch.setenv("AUDIOSCALE_TEST_CRASH_MARKER", str(workdir / "crashed-early.marker"))
    result = run_pretraining(small_config(shards_dir, workdir, run_name="crash-early", max_failures=1))
    assert (workdir / "crashed-early.marker").is_file() and result.steps == 6
    run = tracking.read_run(result.tracking_uri, result.run_id)
    assert [step for step, _ in run["metrics"]["rankme"]] == [0, 3, 6]
    assert run["metrics"]["resumed_from_step"] == [(0, 0.0)]
    for key, history in run["metrics"].items():
        assert not _repeated_steps(history), (key, history)
