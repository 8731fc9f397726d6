"""The labeled tasks built in a child process while the study driver builds the corpus and shards."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from pipeline.corpus.sources import build_marker
from pipeline.corpus.tasks.build import TasksConfig, build_tasks
from pipeline.defaults import tasks_built_beside
from tests.pipeline.corpus.test_tasks_build import hash_tree


def _built(tasks_dir) -> bool:
    return build_marker.is_complete(tasks_dir, TasksConfig(output_dir=tasks_dir, seed=0, tiny=True).settings())


def test_tasks_built_beside_the_body_are_those_built_in_process_and_a_second_use_keeps_them(tmp_path):
    here, beside = tmp_path / "here", tmp_path / "beside"
    build_tasks(TasksConfig(output_dir=here, seed=0, tiny=True))
    with tasks_built_beside(beside, tiny=True):
        running_meanwhile = not _built(beside)  # the body does not wait for the build
    assert running_meanwhile and _built(beside)
    assert hash_tree(beside) == hash_tree(here)  # the same bytes, built in another process
    before = {path: path.stat().st_mtime_ns for path in beside.rglob("*")}
    with tasks_built_beside(beside, tiny=True):
        pass
    assert {path: path.stat().st_mtime_ns for path in beside.rglob("*")} == before
    with tasks_built_beside(None):  # the user's own tasks: nothing is built
        pass


def test_a_build_that_fails_raises_after_the_body_naming_the_folder(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    body_ran = []
    with pytest.raises(RuntimeError, match=r"building the labeled tasks in .*a-file/tasks failed \(exit [12]"):
        with tasks_built_beside(blocker / "tasks", tiny=True):
            body_ran.append(True)
    assert body_ran == [True]


def _tree(root: Path) -> dict[str, int]:
    return {str(path): path.stat().st_mtime_ns for path in root.rglob("*")} if root.exists() else {}


def test_a_body_that_raises_stops_the_build_and_leaves_no_finished_tasks(tmp_path):
    tasks_dir = tmp_path / "tasks"
    with pytest.raises(ValueError, match="prep failed"):
        with tasks_built_beside(tasks_dir, tiny=True):
            deadline = time.monotonic() + 60
            while len(_tree(tasks_dir)) < 3 and time.monotonic() < deadline:  # the child has begun writing
                time.sleep(0.05)
            assert len(_tree(tasks_dir)) >= 3
            raise ValueError("prep failed")
    stopped = _tree(tasks_dir)
    time.sleep(3.0)  # a live build writes a tiny task's clips every fraction of a second
    assert _tree(tasks_dir) == stopped  # stopped, not left building
    assert not _built(tasks_dir)  # a rerun rebuilds them
