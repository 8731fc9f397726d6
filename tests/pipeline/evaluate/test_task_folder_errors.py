"""A damaged HEAR task folder under `python -m pipeline.evaluate`: one stderr line naming the file,
exit code 2, before the checkpoint is read out (a label file with `;` used to end in KeyError: 'idx';
a clip of 0 samples was scored on padding without a word)."""

from __future__ import annotations

import numpy as np
import pytest
import soundfile

from pipeline.evaluate.__main__ import COMMAND, main
from tests.pipeline.cli.test_errors import assert_one_line_error, run_cli
from tests.support import hear_task_fixtures
from tests.support.hear_task_fixtures import build_tiny_tasks
from tests.support.tiny_checkpoint import tiny_checkpoint

QUICK = ["--no-mlflow", "--probe", "linear", "--seeds", "1", "--workers", "1", "--task-rankme-n", "20"]


@pytest.fixture()
def checkpoint(tmp_path):
    return tiny_checkpoint(tmp_path / "ckpt")


@pytest.fixture()
def tasks_dir(tmp_path):
    return build_tiny_tasks(tmp_path / "tasks", clips_per_class={"train": 4, "valid": 2, "test": 2})


def _evaluate(checkpoint, tasks_dir, *extra: str):
    return run_cli("pipeline.evaluate", "--checkpoint", str(checkpoint), "--tasks-dir", str(tasks_dir), *QUICK, *extra)


def test_a_label_file_written_with_semicolons_is_named_with_the_header_it_needs(checkpoint, tasks_dir):
    vocabulary = tasks_dir / "tones" / "labelvocabulary.csv"
    vocabulary.write_text("idx;label\n0;low\n1;mid\n2;high\n")
    completed = _evaluate(checkpoint, tasks_dir)
    assert_one_line_error(completed, str(vocabulary), "idx,label", "idx;label")
    assert "KeyError" not in completed.stderr
    assert "[evaluate]" not in completed.stdout  # refused before any task was embedded


def _empty_clip(tasks_dir, split: str = "test", index: int = 0):
    """A clip file with a WAV header and no samples (an interrupted write, a failed conversion)."""
    path = tasks_dir / "tones" / str(hear_task_fixtures.SAMPLE_RATE_HZ) / split / f"{split}_{index:03d}.wav"
    soundfile.write(path, np.zeros(0, np.float32), hear_task_fixtures.SAMPLE_RATE_HZ, subtype="FLOAT")
    assert soundfile.info(path).frames == 0 and path.stat().st_size > 0
    return path


def test_a_clip_of_zero_samples_is_refused_by_name_before_any_scoring(checkpoint, tasks_dir):
    first, second = _empty_clip(tasks_dir, "test", 0), _empty_clip(tasks_dir, "train", 3)
    completed = _evaluate(checkpoint, tasks_dir)
    assert_one_line_error(completed, str(first), str(second), "2 clip(s)", "0 samples")
    assert "[evaluate]" not in completed.stdout and "results:" not in completed.stdout


def test_a_hear_module_is_not_scored_on_a_clip_of_zero_samples_either(tasks_dir, capsys):
    empty = _empty_clip(tasks_dir)
    argv = ["--hear-module", "tests.support.toy_hear_module", "--tasks-dir", str(tasks_dir), *QUICK]
    assert COMMAND.run(main, argv) == 2
    error = capsys.readouterr().err.strip()
    assert len(error.splitlines()) == 1 and str(empty) in error and "0 samples" in error
