"""The noise floor of the deterministic probes: a bootstrap over test clips gives the linear and kNN
scores the interval their seeds cannot (every seed repeats one score)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from pipeline.evaluate.probes.bootstrap import bootstrap_test_scores, percentile_interval, standard_error
from pipeline.evaluate.probes.metrics import per_clip_hits, score_predictions
from pipeline.evaluate.probes.scene import probe_task, scene_probe, split_arrays
from pipeline.evaluate.scores import quality_q_test_interval
from pipeline.task_format.reader import TaskInfo


def _logits_with_accuracy(n: int, n_classes: int, accuracy: float, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Logits whose argmax is right on exactly round(accuracy * n) clips."""
    rng = np.random.default_rng(seed)
    targets = rng.integers(0, n_classes, n)
    predicted = targets.copy()
    wrong = rng.choice(n, size=n - round(accuracy * n), replace=False)
    predicted[wrong] = (targets[wrong] + 1) % n_classes
    logits = np.eye(n_classes)[predicted] + 0.01 * rng.standard_normal((n, n_classes))
    return torch.from_numpy(logits.astype(np.float32)), torch.from_numpy(targets)


def test_accuracy_bootstrap_matches_the_binomial_standard_error():
    logits, targets = _logits_with_accuracy(400, 5, 0.7)
    replicates = bootstrap_test_scores("top1_acc", logits, targets)
    assert len(replicates) == 1000
    assert np.mean(replicates) == pytest.approx(0.7, abs=0.005)
    # An accuracy on n clips has standard error sqrt(p (1 - p) / n) = 0.0229 here.
    assert standard_error(replicates) == pytest.approx(math.sqrt(0.7 * 0.3 / 400), rel=0.1)
    low, high = percentile_interval(replicates)
    assert low < 0.7 < high and high - low == pytest.approx(2 * 1.96 * 0.0229, rel=0.15)
    # Seeded: the same outputs give the same replicates; another seed other ones.
    assert np.array_equal(replicates, bootstrap_test_scores("top1_acc", logits, targets))
    assert not np.array_equal(replicates, bootstrap_test_scores("top1_acc", logits, targets, seed=1))


def test_per_clip_hits_average_to_the_metric():
    logits, targets = _logits_with_accuracy(90, 24, 0.6, seed=3)
    labels = [str(60 + i) for i in range(24)]  # MIDI pitches: chroma counts octave errors as right
    for metric in ("top1_acc", "pitch_acc", "chroma_acc"):
        hits = per_clip_hits(metric, logits, targets, class_labels=labels)
        assert set(np.unique(hits)) <= {0.0, 1.0}
        assert hits.mean() == pytest.approx(
            score_predictions(metric, logits.unsqueeze(0), targets, class_labels=labels)[0]
        )
    with pytest.raises(ValueError, match="not a mean of per-clip hits"):
        per_clip_hits("mAP", logits, targets)


def test_multilabel_bootstrap_rescores_each_resample():
    rng = np.random.default_rng(0)
    targets = torch.from_numpy((rng.random((120, 3)) < 0.4).astype(np.float32))
    scores = torch.from_numpy((targets.numpy() * 2 - 1 + rng.standard_normal((120, 3))).astype(np.float32))
    replicates = bootstrap_test_scores("mAP", scores, targets)
    full = score_predictions("mAP", scores.unsqueeze(0), targets)[0]
    assert (
        len(replicates) == 200 and abs(np.mean(replicates) - full) < 0.02 and 0.005 < standard_error(replicates) < 0.1
    )


def test_too_few_test_clips_is_a_clear_error():
    with pytest.raises(ValueError, match="at least 2 test clips"):
        bootstrap_test_scores("top1_acc", torch.zeros(1, 3), torch.zeros(1, dtype=torch.long))


def _blobs(n: int, seed: int, separation: float = 1.2):
    rng = np.random.default_rng(seed)
    centres = np.random.default_rng(0).standard_normal((3, 8)) * separation
    labels = rng.integers(0, 3, n)
    return split_arrays((centres[labels] + rng.standard_normal((n, 8))).astype(np.float32), labels.astype(np.int64))


@pytest.mark.parametrize("probe", ["linear", "knn"])
def test_deterministic_probe_scores_carry_a_test_clip_interval(probe):
    task = TaskInfo(
        name="blobs",
        directory=None,
        prediction_type="multiclass",
        primary_metric="top1_acc",
        split_mode="trainvaltest",
        splits=("train", "valid", "test"),
        labels=("0", "1", "2"),
    )
    splits = {"train": _blobs(300, 1), "valid": _blobs(100, 2), "test": _blobs(300, 3)}
    score, results = probe_task(task, splits, seeds=1, training=scene_probe(probe))
    assert 0.45 < score.mean < 0.95  # overlapping classes: a score with room to vary
    expected_se = math.sqrt(score.mean * (1 - score.mean) / 300)
    assert score.test_se == pytest.approx(expected_se, rel=0.15)
    assert score.test_ci_low < score.mean < score.test_ci_high
    assert math.isnan(score.ci_low)  # one seed: no interval over seeds, and none invented
    assert results[0].test_bootstrap is not None


def test_mlp_scores_have_no_test_clip_interval():
    task = TaskInfo(
        name="blobs",
        directory=None,
        prediction_type="multiclass",
        primary_metric="top1_acc",
        split_mode="trainvaltest",
        splits=("train", "valid", "test"),
        labels=("0", "1", "2"),
    )
    splits = {"train": _blobs(60, 1), "valid": _blobs(30, 2), "test": _blobs(30, 3)}
    score, _ = probe_task(task, splits, seeds=1, training=scene_probe("quick"))
    assert math.isnan(score.test_se)


def test_q_interval_from_the_tasks_test_clip_errors():
    scores = {"a": {"mean": 0.6, "test_se": 0.03}, "b": {"mean": 0.8, "test_se": 0.04}}
    low, high = quality_q_test_interval(scores)
    # Independent test sets: se(Q) = sqrt(0.03^2 + 0.04^2) / 2 = 0.025, z = 1.96.
    assert (low, high) == pytest.approx((0.7 - 1.96 * 0.025, 0.7 + 1.96 * 0.025), abs=1e-4)
    assert all(math.isnan(v) for v in quality_q_test_interval({**scores, "c": {"mean": 0.5}}))
