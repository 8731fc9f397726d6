"""The same study run twice gives the same closing lines, to the last printed digit: once with its
shards and Ray storage on disk, once with both in a bucket (an S3-compatible store on loopback), as a
cluster study keeps them. One Q wherever a study runs: before, a checkpoint trained from bucket shards
was scored with per-clip normalisation instead of the shards' statistics (Q 0.668 against 0.684).

Both runs are real (the compute grid's 4 Ray Tune trials, each pretraining mae-debug with Ray Train
on tiny prep shards, then scoring R and Q with the kNN probe), cut to a few steps and one scored
checkpoint per trial (a trial costs ~20 s here, most of it Ray Train's start-up, so the smallest
grid keeps the test near 2 minutes); they differ only in their
MLflow store and where their shards and Ray storage are. Every seed is fixed (each trial's from its name) and every torch
thread count comes from the configuration, not from timing, so nothing may differ but the lines
that name the store or its run ids.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline.storage.checkpoint_copy import copy_up
from sweeps.record.study import read_study
from sweeps.study.closing import closing_lines
from sweeps.study.config import StudyConfig, StudyEvaluation, StudyPretraining
from sweeps.study.driver import run_study
from tests.support.hear_task_fixtures import build_tiny_tasks
from tests.support.pretrain_testdata import make_tiny_shards

pytestmark = pytest.mark.ray
RUNNER = "tests.support.short_real_trials:run_short_real_trial"


def _closing_lines(root: Path, shards_root: str, storage_path: str, tasks: Path) -> list[str]:
    uri = f"sqlite:///{root / 'mlflow.db'}"
    config = StudyConfig(
        grid="compute", study_name="twice", tracking_uri=uri, storage_path=storage_path,
        shards_root=shards_root, tasks_dir=str(tasks), runner=RUNNER, prepare_shards=False, n_bootstrap=50,
        quiet=True, pretrain=StudyPretraining(global_batch_size=8), evaluate=StudyEvaluation(eval_checkpoints="final"),
    )  # fmt: skip
    outcome = run_study(config)
    assert outcome.trials_failed == [] and len(outcome.trials_run) == 4
    return closing_lines(outcome, tracking_uri=uri, bin_dir=root)


def _naming_this_store(line: str) -> bool:
    return "http://" in line or "mlflow.db" in line


def test_a_study_on_disk_and_in_a_bucket_prints_the_same_closing_lines(ray_with_bucket_env, tmp_path):
    shards_root = tmp_path / "shards"
    shards_root.mkdir()
    shards = make_tiny_shards(tmp_path, preset_name="dasheng")
    (shards_root / "dasheng").symlink_to(shards)
    bucket_shards_root = ray_with_bucket_env.uri("twice/shards")
    copy_up(shards, ray_with_bucket_env.uri("twice/shards/dasheng"), what="--shards")
    tasks = build_tiny_tasks(tmp_path / "tasks", label_noise=0.25)
    first = _closing_lines(tmp_path / "first", str(shards_root), str(tmp_path / "first" / "ray"), tasks)
    second = _closing_lines(tmp_path / "second", bucket_shards_root, ray_with_bucket_env.uri("twice/ray"), tasks)
    kept = [line for line in first if not _naming_this_store(line)]
    assert kept == [line for line in second if not _naming_this_store(line)]
    # The lines compared carry the study's numbers: its best point with Q, its interval and R.
    best = next(line for line in kept if line.startswith("best: "))
    assert "Q 0." in best and "95% " in best and "RankMe R" in best
    assert len(first) - len(kept) >= 2  # the store's command and URLs are left out, and only they
    # Both read the shards' dataset statistics (the bucket's once fell back to per-clip normalisation).
    for root in ("first", "second"):
        trials = read_study(f"sqlite:///{tmp_path / root / 'mlflow.db'}", "twice").trials()
        assert {trial.reading.get("input_normalisation") for trial in trials} == {"dataset"}
