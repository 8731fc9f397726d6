"""The language-ID probe: learns a class that lives in the frames' statistics, nothing from random labels."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from pipeline.evaluate.probes.lid import (
    LidProbeConfig,
    concat_frame_splits,
    pad_frame_features,
    probe_task_lid,
    train_lid_probe,
)
from pipeline.task_format.reader import TaskInfo

# Class k: frames drawn with spread FRAME_SPREADS[k] around one shared offset: the class is in the
# frames' spread (the std the attentive statistics pooling computes), not in where they sit.
FRAME_SPREADS = (0.4, 1.0, 2.5)
DIM = 12


def _frame_clips(n: int, *, seed: int, random_labels: bool = False):
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, len(FRAME_SPREADS), n)
    offset = np.random.default_rng(0).standard_normal(DIM)  # shared by every class
    clips = [
        (offset + FRAME_SPREADS[label] * rng.standard_normal((int(rng.integers(15, 40)), DIM))).astype(np.float32)
        for label in labels
    ]
    if random_labels:
        labels = rng.integers(0, len(FRAME_SPREADS), n)
    return pad_frame_features(clips, labels)


def _task() -> TaskInfo:
    return TaskInfo(
        name="spreads",
        directory=None,
        prediction_type="multiclass",
        primary_metric="top1_acc",
        split_mode="trainvaltest",
        splits=("train", "valid", "test"),
        labels=tuple(str(k) for k in range(len(FRAME_SPREADS))),
        label_kind="language",
    )


def test_padding_marks_real_frames_and_concat_pads_to_the_longest():
    split = pad_frame_features([np.ones((2, 3), np.float32), 2 * np.ones((4, 3), np.float32)], np.array([0, 1]))
    assert split.frames.shape == (2, 4, 3)
    assert split.valid_frames.tolist() == [[True, True, False, False], [True, True, True, True]]
    assert float(split.frames[0, 2:].abs().sum()) == 0.0
    longer = pad_frame_features([np.ones((6, 3), np.float32)], np.array([2]))
    joined = concat_frame_splits([split, longer])
    assert joined.frames.shape == (3, 6, 3) and joined.targets.tolist() == [0, 1, 2]
    assert joined.valid_frames.sum(dim=1).tolist() == [2, 4, 6]


@pytest.mark.parametrize("attention", ["self", "performer", "agent"])
def test_lid_probe_learns_a_class_that_lives_in_the_frame_spread(attention):
    train, valid, test = _frame_clips(240, seed=1), _frame_clips(60, seed=2), _frame_clips(120, seed=3)
    result = train_lid_probe(
        train=train, valid=valid, test=test, n_classes=3, seed=0, config=LidProbeConfig(attention=attention)
    )
    assert result.validation_score >= 0.95
    assert result.test_score >= 0.95


def test_lid_probe_stays_near_chance_on_random_labels():
    splits = {
        "train": _frame_clips(240, seed=1, random_labels=True),
        "valid": _frame_clips(90, seed=2, random_labels=True),
        "test": _frame_clips(300, seed=3, random_labels=True),
    }
    score, results = probe_task_lid(_task(), splits, seeds=2, config=LidProbeConfig(attention="agent"))
    assert abs(score.mean - 1 / 3) < 0.1
    assert score.probe == "lid-agent" and len(score.seed_scores) == 2
    assert score.ci_low <= score.mean <= score.ci_high
    # Early stopping ends training long before the epoch bound when validation stops improving.
    assert all(r.epochs_trained < LidProbeConfig().max_epochs for r in results)


def test_lid_probe_is_deterministic_per_seed_and_rejects_unknown_attention():
    train, valid, test = _frame_clips(60, seed=1), _frame_clips(30, seed=2), _frame_clips(30, seed=3)
    config = LidProbeConfig(max_epochs=3)
    first = train_lid_probe(train=train, valid=valid, test=test, n_classes=3, seed=4, config=config)
    again = train_lid_probe(train=train, valid=valid, test=test, n_classes=3, seed=4, config=config)
    assert first == again
    with pytest.raises(ValueError, match="unknown LID attention"):
        LidProbeConfig(attention="linear")
    with pytest.raises(ValueError, match="multiclass only"):
        probe_task_lid(dataclasses.replace(_task(), prediction_type="multilabel"), {}, seeds=1)
