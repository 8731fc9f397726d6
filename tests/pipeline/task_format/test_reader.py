"""Reading HEAR task directories: metadata, folds, targets, clear errors."""

from __future__ import annotations

import json

import numpy as np
import pytest

from pipeline.task_format.reader import (
    TaskFormatError,
    TaskInfo,
    encode_targets,
    list_task_dirs,
    probe_splits,
    read_task_info,
)
from tests.support.hear_task_fixtures import build_tiny_tasks


@pytest.fixture(scope="module")
def tasks_dir(tmp_path_factory):
    return build_tiny_tasks(tmp_path_factory.mktemp("tasks"), clips_per_class={"train": 2, "valid": 1, "test": 1})


def _info(**changes) -> TaskInfo:
    fields = dict(
        name="t",
        directory=None,
        prediction_type="multiclass",
        primary_metric="top1_acc",
        split_mode="new_split_kfold",
        splits=("fold00", "fold01", "fold02", "fold03"),
        labels=("a", "b"),
    )
    return TaskInfo(**(fields | changes))


def test_reads_metadata_and_vocabulary(tasks_dir):
    task = read_task_info(tasks_dir / "mixtures")
    assert (task.name, task.prediction_type, task.primary_metric) == ("mixtures", "multilabel", "mAP")
    assert task.labels == ("tone", "noise")
    assert [p.name for p in list_task_dirs(tasks_dir)] == ["mixtures", "tones"]


def test_kfold_tests_each_fold_once_and_validates_on_the_next():
    folds = probe_splits(_info())
    assert [(f.test, f.valid) for f in folds] == [
        ("fold00", "fold01"),
        ("fold01", "fold02"),
        ("fold02", "fold03"),
        ("fold03", "fold00"),
    ]
    assert folds[0].train == ("fold02", "fold03")


def test_targets_are_indices_or_multi_hot():
    np.testing.assert_array_equal(encode_targets(_info(), [["b"], ["a"]]), [1, 0])
    multi = encode_targets(_info(prediction_type="multilabel"), [["a", "b"], []])
    np.testing.assert_array_equal(multi, [[1, 1], [0, 0]])
    with pytest.raises(TaskFormatError, match="multiclass"):
        encode_targets(_info(), [["a", "b"]])


def test_missing_metadata_and_tasks_dir_are_clear_errors(tmp_path):
    with pytest.raises(TaskFormatError, match="task_metadata.json"):
        read_task_info(tmp_path)
    with pytest.raises(TaskFormatError, match="pipeline.corpus tasks"):
        list_task_dirs(tmp_path / "absent")


def test_event_tasks_are_refused(tmp_path, tasks_dir):
    metadata = json.loads((tasks_dir / "tones" / "task_metadata.json").read_text())
    (tmp_path / "task_metadata.json").write_text(json.dumps(metadata | {"embedding_type": "event"}))
    with pytest.raises(TaskFormatError, match="scene tasks only"):
        read_task_info(tmp_path)


def test_task_builders_mark_exactly_the_language_tasks(tmp_path):
    from pipeline.corpus.tasks import language_real, language_synthetic, pitch
    from pipeline.corpus.tasks.clip_shaping import seconds_to_samples
    from pipeline.corpus.tasks.hear_writer import (
        LabeledClip,
        TaskBuild,
        write_hear_task,
    )

    for spec, is_language in ((language_real.SPEC, True), (language_synthetic.SPEC, True), (pitch.SPEC, False)):
        wave = np.zeros(seconds_to_samples(spec.sample_duration_s), np.float32)
        clips = [
            LabeledClip(split=split, label=spec.labels[0], wave=wave, source={}) for split in ("train", "valid", "test")
        ]
        write_hear_task(tmp_path, TaskBuild(spec=spec, clips=clips), mode="tiny")
        assert read_task_info(tmp_path / spec.name).is_language_id is is_language
