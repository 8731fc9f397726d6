"""The linear and kNN probes: learn what is separable, nothing from random labels, choose their
grid value on validation, handle multilabel and k-fold tasks, and name themselves in the score."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pipeline.evaluate.probes.knn import KnnProbeConfig, run_knn_probe
from pipeline.evaluate.probes.linear import LinearProbeConfig, run_linear_probe
from pipeline.evaluate.probes.scene import (
    SCENE_PROBES,
    probe_task,
    scene_probe,
    split_arrays,
)
from pipeline.task_format.reader import TaskInfo


def _blobs(n: int, n_classes: int, dim: int, *, separation: float, seed: int, random_labels: bool = False):
    rng = np.random.default_rng(seed)
    centres = np.random.default_rng(0).standard_normal((n_classes, dim)) * separation
    labels = rng.integers(0, n_classes, n)
    features = centres[labels] + rng.standard_normal((n, dim))
    if random_labels:
        labels = rng.integers(0, n_classes, n)
    return split_arrays(features.astype(np.float32), labels.astype(np.int64))


def _task(
    n_classes: int, *, splits=("train", "valid", "test"), prediction_type="multiclass", metric="top1_acc"
) -> TaskInfo:
    return TaskInfo(
        name="blobs",
        directory=None,
        prediction_type=prediction_type,
        primary_metric=metric,
        split_mode="trainvaltest" if "train" in splits else "stratified_grouped",
        splits=splits,
        labels=tuple(str(i) for i in range(n_classes)),
    )


def _run(probe: str, train, valid, test, n_classes: int, metric: str = "top1_acc", **config):
    if probe == "linear":
        return run_linear_probe(
            train=train,
            valid=valid,
            test=test,
            n_classes=n_classes,
            metric=metric,
            multilabel=metric == "mAP",
            config=LinearProbeConfig(**config),
        )
    return run_knn_probe(
        train=train, valid=valid, test=test, n_classes=n_classes, metric=metric, config=KnnProbeConfig(**config)
    )


@pytest.mark.parametrize("probe", ["linear", "knn"])
def test_separable_blobs_score_near_one(probe):
    train, valid, test = (_blobs(n, 4, 16, separation=4.0, seed=s) for n, s in ((300, 1), (100, 2), (200, 3)))
    result = _run(probe, train, valid, test, 4)
    assert result.test_score >= 0.98 and result.validation_score >= 0.98


@pytest.mark.parametrize("probe", ["linear", "knn"])
def test_random_labels_score_near_chance(probe):
    train, valid, test = (
        _blobs(n, 4, 16, separation=4.0, seed=s, random_labels=True) for n, s in ((400, 1), (200, 2), (800, 3))
    )
    assert abs(_run(probe, train, valid, test, 4).test_score - 0.25) < 0.06


def test_validation_chooses_the_regularisation():
    c_grid = (1e-6, 1.0, 1e3)
    # Learnable labels: the nearly unregularised fits separate the classes, C = 1e-6 only knows the prior.
    separable = [_blobs(n, 3, 8, separation=3.0, seed=s) for n, s in ((300, 1), (150, 2), (150, 3))]
    learnable = _run("linear", *separable, 3, c_grid=c_grid)
    # Noise labels, 80% one class: C = 1e-6 predicts that class (0.8); weak regularisation fits noise.
    rng = np.random.default_rng(5)

    def noise(n: int):
        return split_arrays(rng.standard_normal((n, 40)).astype(np.float32), (rng.random(n) < 0.2).astype(np.int64))

    unlearnable = _run("linear", noise(80), noise(400), noise(400), 2, c_grid=c_grid)
    for result in (learnable, unlearnable):
        assert result.choice == max(result.validation_scores, key=result.validation_scores.get)
        assert result.validation_score == result.validation_scores[result.choice]
    assert learnable.choice > 1e-6 and learnable.validation_scores[1e-6] < 0.5 < learnable.validation_score
    assert unlearnable.choice == 1e-6 and unlearnable.validation_scores[1e3] < unlearnable.validation_score


def _subclusters(n_per_cluster: int, *, clusters: int, seed: int):
    """Tight clusters, each of a random class of 2: only the nearest neighbours know a clip's class."""
    centres = np.random.default_rng(0).standard_normal((clusters, 32))
    classes = np.random.default_rng(1).integers(0, 2, clusters)
    rng = np.random.default_rng(seed)
    cluster = np.repeat(np.arange(clusters), n_per_cluster)
    features = centres[cluster] + 0.05 * rng.standard_normal((len(cluster), 32))
    return split_arrays(features.astype(np.float32), classes[cluster].astype(np.int64))


def test_validation_chooses_k():
    k_grid = (1, 5, 45)
    # Small same-class clusters of 2 training clips each: one neighbour is right, 45 vote across clusters.
    clustered = _run(
        "knn",
        *(_subclusters(n, clusters=30, seed=s) for n, s in ((2, 1), (5, 2), (5, 3))),
        2,
        k_grid=k_grid,
        vote="majority",
        standardise=False,
    )
    # Two well separated blobs with 35% of labels flipped: one neighbour copies noise, 45 recover the majority.
    rng = np.random.default_rng(7)

    def noisy(n: int):
        labels = rng.integers(0, 2, n)
        features = np.where(labels[:, None] == 1, 3.0, -3.0) + rng.standard_normal((n, 8))
        return split_arrays(features.astype(np.float32), np.where(rng.random(n) < 0.35, 1 - labels, labels))

    smoothed = _run("knn", noisy(400), noisy(300), noisy(300), 2, k_grid=k_grid, vote="majority")
    for result in (clustered, smoothed):
        assert result.choice == max(result.validation_scores, key=result.validation_scores.get)
    assert clustered.choice == 1 and clustered.test_score > 0.95 and clustered.validation_scores[45.0] < 0.8
    assert smoothed.choice == 45 and smoothed.validation_scores[1.0] < smoothed.validation_score


def _multilabel(n: int, seed: int, *, random_labels: bool = False):
    rng = np.random.default_rng(seed)
    features = rng.standard_normal((n, 6)).astype(np.float32)
    targets = (features[:, :3] > 0).astype(np.float32)  # label k present when feature k > 0
    if random_labels:
        targets = (rng.random((n, 3)) < 0.5).astype(np.float32)
    # A fourth class that no clip has: a constant column the probes must get through (the metric skips it).
    return split_arrays(features, np.concatenate([targets, np.zeros((n, 1), np.float32)], axis=1))


@pytest.mark.parametrize("probe, floor", [("linear", 0.9), ("knn", 0.8)])
def test_multilabel_scores_map(probe, floor):
    learnable = _run(probe, *(_multilabel(n, s) for n, s in ((400, 1), (150, 2), (200, 3))), 4, metric="mAP")
    noise = _run(
        probe, *(_multilabel(n, s, random_labels=True) for n, s in ((400, 1), (150, 2), (200, 3))), 4, metric="mAP"
    )
    assert learnable.test_score > floor
    assert noise.test_score < 0.6  # the classes' base rate is 0.5


@pytest.mark.parametrize("probe", ["linear", "knn"])
def test_k_fold_task_and_the_score_names_its_probe(probe):
    folds = {f"fold{i:02d}": _blobs(120, 3, 8, separation=3.0, seed=10 + i) for i in range(4)}
    score, results = probe_task(_task(3, splits=tuple(folds)), folds, seeds=3, training=scene_probe(probe))
    assert score.probe == probe
    assert len(results) == 3 * 4  # seeds x folds
    assert score.mean >= 0.95
    # No random state: every seed repeats the same fold scores, so there is no interval over seeds
    # (not a zero-width one); the interval is the test clips'.
    assert len(set(score.seed_scores)) == 1
    assert math.isnan(score.ci_low) and math.isnan(score.ci_high)
    assert score.test_ci_low <= score.mean <= score.test_ci_high  # a perfect score resamples to itself


def test_mlp_scores_keep_their_schedule_name_and_every_probe_is_named():
    assert list(SCENE_PROBES) == ["hear", "quick", "appc", "linear", "knn"]
    with pytest.raises(ValueError, match="unknown probe"):
        scene_probe("svm")
    with pytest.raises(ValueError, match="unknown kNN vote"):
        KnnProbeConfig(vote="median")
