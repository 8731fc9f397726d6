"""`python -m sweeps.external` against a real study in a SQLite MLflow store, as a user runs it.

- A task folder other than the study's: the study's Q is the mean over its trials' tasks, so an
  external Q over other tasks would sit on its figure without comparing. It is refused in one line
  (exit 2) naming --tasks-dir, the study's tasks and what is missing, before the module is scored;
  `--accept-task-set` scores anyway and records the difference on the point's run.
- The user's module failing to load is named first (`python -m sweeps.external: error: --hear-module NAME: ...`).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from pipeline.rankme.pool import select_pool
from pipeline.tracking import runs as tracking
from sweeps.record.keys import EXTERNAL_TAG, STUDY_EXPERIMENT, TASK_SET_TAG
from sweeps.record.rankme_pool import RankMePoolRecord
from sweeps.record.trial import TrialRecord
from tests.conftest import REPO_ROOT
from tests.pipeline.cli.test_errors import assert_one_line_error
from tests.support.hear_task_fixtures import build_tiny_tasks
from tests.support.waveform_pool_fixtures import CROP_FRAMES, write_audio_shards

TOY = "tests.support.toy_hear_module"
STUDY = "toy"
STUDY_TASKS = {"tones": 0.9, "mixtures": 0.7}  # what the study's trials were scored on


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    """A linear-probe study of two finished trials, each scored on `STUDY_TASKS` and measured on one pool."""
    root = tmp_path_factory.mktemp("study")
    uri = f"sqlite:///{root / 'mlflow.db'}"
    shards, _ = write_audio_shards(root / "pool")
    pool = select_pool(shards, crop_frames=CROP_FRAMES)
    parent = tracking.start_or_resume_run(tracking_uri=uri, experiment_name=STUDY_EXPERIMENT, run_name=STUDY)
    parent.log_params({"grid": "mask_ratio", "probe": "linear"})
    for index, ratio in enumerate((0.6, 0.8)):
        child = tracking.start_or_resume_run(tracking_uri=uri, experiment_name=STUDY_EXPERIMENT,
                                             run_name=f"{STUDY}/mask{ratio}", parent_run_id=parent.run_id)  # fmt: skip
        TrialRecord(
            trial=f"mask{ratio}", model_name="mae-debug", arch="mae", n_params=1000, hours=1.0, flops=1e12,
            mask_ratio=ratio, rankme=4.0 + index, rankme_by_step={10: 4.0 + index}, q=0.8, task_scores=STUDY_TASKS,
            rankme_n=pool.n, rankme_pool=pool.fingerprint, pool=RankMePoolRecord.of(pool),
        ).write(child, study_run=parent)  # fmt: skip
        child.finish()
    parent.finish()
    return uri, parent.run_id


@pytest.fixture(scope="module")
def tasks(tmp_path_factory):
    """(the study's task folder, a folder holding only one of its tasks)."""
    root = tmp_path_factory.mktemp("tasks")
    every = build_tiny_tasks(root / "every", clips_per_class={"train": 4, "valid": 2, "test": 2})
    one = build_tiny_tasks(root / "one", clips_per_class={"train": 4, "valid": 2, "test": 2})
    shutil.rmtree(one / "mixtures")
    return every, one


def external(study, tasks_dir, tmp_path, *extra: str, pythonpath: str = "") -> subprocess.CompletedProcess:
    uri, _ = study
    argv = ["--study", STUDY, "--tracking-uri", uri, "--tasks-dir", str(tasks_dir), "--probe", "linear",
            "--seeds", "1", "--task-rankme-n", "10", "--output", str(tmp_path / "out"), *extra]  # fmt: skip
    if "--hear-module" not in extra:
        argv += ["--hear-module", TOY]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO_ROOT), pythonpath]))}
    return subprocess.run(
        [sys.executable, "-m", "sweeps.external", *argv],
        capture_output=True, text=True, timeout=180, env=env, cwd=REPO_ROOT,
    )  # fmt: skip


def external_runs(study) -> list[dict]:
    uri, parent_id = study
    return [run for run in tracking.list_child_runs(uri, parent_id) if run["tags"].get(EXTERNAL_TAG) == "true"]


def test_a_task_folder_other_than_the_studys_is_refused_before_scoring(study, tasks, tmp_path):
    _, one = tasks
    completed = external(study, one, tmp_path)
    assert_one_line_error(
        completed, f"--tasks-dir {one}", "1 task", f"study {STUDY}", "mixtures, tones", "missing 1", "--accept-task-set"
    )
    assert "[evaluate]" not in completed.stdout and not (tmp_path / "out").exists()
    assert external_runs(study) == []


def test_accept_task_set_scores_anyway_and_the_point_records_the_difference(study, tasks, tmp_path):
    _, one = tasks
    completed = external(study, one, tmp_path, "--accept-task-set", "--label", "one-task")
    assert completed.returncode == 0, completed.stderr[-2000:]
    assert "missing 1 of the study's 2 tasks: mixtures" in completed.stderr  # said on the terminal too
    [run] = [run for run in external_runs(study) if run["params"]["label"] == "one-task"]
    assert "missing 1 of the study's 2 tasks: mixtures" in run["tags"][TASK_SET_TAG]
    assert "--accept-task-set" in run["tags"][TASK_SET_TAG]
    assert json.loads(run["params"]["tasks"]) == ["tones"]


def test_the_studys_own_task_folder_scores_and_says_so_on_the_run(study, tasks, tmp_path):
    every, _ = tasks
    completed = external(study, every, tmp_path, "--label", "every-task")
    assert completed.returncode == 0, completed.stderr[-2000:]
    [run] = [run for run in external_runs(study) if run["params"]["label"] == "every-task"]
    assert run["tags"][TASK_SET_TAG] == "the study's 2 tasks: mixtures, tones"


def test_a_module_failing_to_load_is_named_first(study, tasks, tmp_path):
    (tmp_path / "bad_config_hear.py").write_text(
        "def load_model(model_file_path=''):\n    raise ValueError('bad config')\n\n"
        "def get_scene_embeddings(audio, model):\n    return audio\n"
    )
    every, _ = tasks
    completed = external(study, every, tmp_path, "--hear-module", "bad_config_hear", pythonpath=str(tmp_path))
    assert_one_line_error(
        completed, "python -m sweeps.external: error: --hear-module bad_config_hear: load_model raised ValueError"
    )
