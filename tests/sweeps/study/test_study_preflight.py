"""A study checks every input before its first trial: a mistake costs seconds and leaves no run RUNNING."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from pipeline.tracking import runs as tracking
from sweeps.record.keys import STUDY_EXPERIMENT
from sweeps.study.config import StudyConfig, StudyEvaluation
from sweeps.study.preflight import check_study_inputs
from tests.conftest import REPO_ROOT
from tests.support.hear_task_fixtures import build_tiny_tasks


def test_mistyped_tasks_directory_is_refused_before_any_trial(tmp_path, tracking_uri):
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    started = time.monotonic()
    completed = subprocess.run(
        [sys.executable, "-m", "sweeps.scaling", "--grid", "mask_ratio", "--tasks", str(tmp_path / "nonexistent"),
         "--tracking-uri", tracking_uri, "--storage-path", str(tmp_path / "ray")],
        capture_output=True, text=True, timeout=300, env=env, cwd=REPO_ROOT,
    )  # fmt: skip
    elapsed = time.monotonic() - started
    assert completed.returncode == 2 and "Traceback" not in completed.stderr, completed.stderr[-2000:]
    (line,) = [line for line in completed.stderr.splitlines() if "error" in line]
    assert "--tasks" in line and "nonexistent" in line
    assert elapsed < 60, elapsed  # no corpus built, no shards, no Ray
    assert tracking.find_run_id(tracking_uri, STUDY_EXPERIMENT, "mask_ratio-cpu_default") is None


def _config(tmp_path, tracking_uri, **changes):
    return StudyConfig(grid="mask_ratio", tracking_uri=tracking_uri, storage_path=str(tmp_path / "ray"), **changes)


def test_tasks_directory_without_tasks_is_refused(tmp_path, tracking_uri):
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match=r"--tasks .*no HEAR tasks"):
        check_study_inputs(_config(tmp_path, tracking_uri, tasks_dir=str(tmp_path / "empty")))


def test_real_tasks_and_corpus_pass(tmp_path, tracking_uri):
    tasks = build_tiny_tasks(tmp_path / "tasks")
    (tmp_path / "corpus").mkdir()
    (tmp_path / "corpus" / "a.wav").write_bytes(b"RIFF")
    check_study_inputs(_config(tmp_path, tracking_uri, tasks_dir=str(tasks), corpus_dir=str(tmp_path / "corpus")))


def test_empty_corpus_is_refused(tmp_path, tracking_uri):
    (tmp_path / "corpus").mkdir()
    with pytest.raises(ValueError, match="--corpus"):
        check_study_inputs(_config(tmp_path, tracking_uri, corpus_dir=str(tmp_path / "corpus")))


def test_unreachable_tracking_server_is_refused_in_seconds(tmp_path):
    started = time.monotonic()
    with pytest.raises(ValueError, match=r"--tracking-uri http://127.0.0.1:9"):
        check_study_inputs(_config(tmp_path, "http://127.0.0.1:9"))
    assert time.monotonic() - started < 10


def test_more_gpus_than_the_machine_has_are_refused(tmp_path, tracking_uri):
    with pytest.raises(ValueError, match="--gpus-per-trial 64"):
        check_study_inputs(_config(tmp_path, tracking_uri, gpus_per_trial=64))


def test_a_task_without_its_test_split_is_refused_before_any_training(tmp_path, tracking_uri):
    tasks = build_tiny_tasks(tmp_path / "tasks")
    task = sorted(path.parent for path in tasks.glob("*/task_metadata.json"))[0]
    (task / "test.json").unlink()
    with pytest.raises(ValueError, match=rf"--tasks .*{task.name}/test.json"):
        check_study_inputs(_config(tmp_path, tracking_uri, tasks_dir=str(tasks)))


def test_a_split_whose_audio_is_missing_is_refused(tmp_path, tracking_uri):
    tasks = build_tiny_tasks(tmp_path / "tasks")
    task = sorted(path.parent for path in tasks.glob("*/task_metadata.json"))[0]
    clip = sorted((task / "16000" / "valid").iterdir())[0]
    clip.unlink()
    with pytest.raises(ValueError, match=rf"lacks 1 clip\(s\) that valid.json lists, e.g. {clip.name}"):
        check_study_inputs(_config(tmp_path, tracking_uri, tasks_dir=str(tasks)))


def test_paper_profile_refuses_a_task_folder_that_is_not_the_papers_and_lists_the_difference(tmp_path, tracking_uri):
    tasks = build_tiny_tasks(tmp_path / "tasks")
    (tasks / "esc50-v2.0.0-full").mkdir()  # one of the paper's, present (empty tasks are not HEAR tasks: copy one)
    for item in (tasks / "tones").iterdir():
        os.symlink(item, tasks / "esc50-v2.0.0-full" / item.name)
    paper = _config(tmp_path, tracking_uri, profile="paper", tasks_dir=str(tasks))
    with pytest.raises(ValueError, match="--accept-task-set") as refused:
        check_study_inputs(paper)
    message = str(refused.value)
    assert "missing 15 of the paper's 16: speech_commands-v0.0.2-5h" in message and "fsd50k-v1.0-full" in message
    assert "2 not in the paper's set: mixtures, tones" in message
    accepted = StudyConfig(**{**paper.__dict__, "evaluate": StudyEvaluation(accept_task_set=True)})
    check = check_study_inputs(accepted)
    assert not check.matches and check.extra == ("mixtures", "tones") and len(check.missing) == 15
    # The embedded default tasks under the paper profile: refused too, naming them.
    with pytest.raises(ValueError, match=r"the task folder \(the embedded default tasks\) differs"):
        check_study_inputs(_config(tmp_path, tracking_uri, profile="paper"))
    # The CPU profile declares no set.
    assert check_study_inputs(_config(tmp_path, tracking_uri, tasks_dir=str(tasks))).describe() == (
        "the profile declares no task set"
    )
