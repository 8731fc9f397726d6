"""Aggregates: t-intervals, Q and the normalised score s(m)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pipeline.evaluate.scores import (
    mean_confidence_interval,
    normalised_scores,
    paired_interval,
    quality_q,
    quality_q_interval,
    quality_q_replicates,
    task_score_from_seeds,
)


def test_confidence_interval_matches_hand_computation():
    # values 0.5, 0.6, 0.7: mean 0.6, sample std 0.1, t(0.975, 2) = 4.302653
    mean, low, high = mean_confidence_interval([0.5, 0.6, 0.7])
    half = 4.302653 * 0.1 / math.sqrt(3)
    assert mean == pytest.approx(0.6)
    assert (low, high) == pytest.approx((0.6 - half, 0.6 + half), rel=1e-6)


def test_single_seed_has_no_interval():
    score = task_score_from_seeds("top1_acc", [0.8])
    assert score.mean == 0.8 and math.isnan(score.ci_low) and math.isnan(score.ci_high)


def test_seeds_that_repeat_one_score_give_no_interval_and_a_deterministic_probe_gives_its_test_clips():
    # kNN with 3 seeds: (0.6, 0.6, 0.6). Over seeds that would be the interval (0.6, 0.6).
    replicates = np.random.default_rng(0).normal(0.6, 0.02, 200)
    score = task_score_from_seeds("top1_acc", [0.6, 0.6, 0.6], probe="knn", test_replicates=replicates)
    assert math.isnan(score.ci_low) and math.isnan(score.ci_high)
    assert score.test_ci_low < 0.6 < score.test_ci_high and score.test_ci_high - score.test_ci_low > 0.05
    # An MLP whose seeds all score 1.0 on a tiny task: no interval either.
    assert math.isnan(task_score_from_seeds("top1_acc", [1.0, 1.0]).ci_low)
    per_task = {"a": score.to_dict(), "b": task_score_from_seeds("mAP", [0.5, 0.5, 0.5]).to_dict()}
    assert all(math.isnan(bound) for bound in quality_q_interval(per_task))


def test_q_is_the_mean_of_task_scores_and_rejects_out_of_range():
    assert quality_q({"a": 0.5, "b": 0.9}) == pytest.approx(0.7)
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        quality_q({"a": 1.7})


def test_normalised_score_matches_hand_computation():
    scores = {
        "m1": {"t1": 0.2, "t2": 0.9},
        "m2": {"t1": 0.6, "t2": 0.5},
        "m3": {"t1": 0.4, "t2": 0.7},
    }
    # t1: min 0.2, max 0.6 -> m1 0, m2 1, m3 0.5; t2: min 0.5, max 0.9 -> m1 1, m2 0, m3 0.5
    result = normalised_scores(scores)
    assert result == pytest.approx({"m1": 50.0, "m2": 50.0, "m3": 50.0})
    scores["m3"]["t2"] = 0.9  # m3: t1 0.5, t2 1 -> 75
    assert normalised_scores(scores)["m3"] == pytest.approx(75.0)


def test_normalised_score_uses_only_shared_tasks_and_ties_count_zero():
    scores = {"m1": {"t1": 0.3, "t2": 0.5, "extra": 1.0}, "m2": {"t1": 0.3, "t2": 0.9}}
    assert normalised_scores(scores) == pytest.approx({"m1": 0.0, "m2": 50.0})


def test_q_interval_is_the_t_interval_of_per_seed_q():
    # Seed i's Q averages the tasks' seed-i scores: (0.5+0.7)/2, (0.6+0.8)/2, (0.7+0.9)/2 = 0.6, 0.7, 0.8.
    task_scores = {
        "a": task_score_from_seeds("top1_acc", [0.5, 0.6, 0.7]).to_dict(),
        "b": task_score_from_seeds("mAP", [0.7, 0.8, 0.9]).to_dict(),
    }
    half = 4.302653 * 0.1 / math.sqrt(3)
    assert quality_q_interval(task_scores) == pytest.approx((0.7 - half, 0.7 + half), rel=1e-6)


def test_q_interval_is_nan_for_one_seed_or_unequal_seed_counts():
    one_seed = {"a": task_score_from_seeds("top1_acc", [0.8]).to_dict()}
    unequal = {
        "a": task_score_from_seeds("top1_acc", [0.5, 0.6]).to_dict(),
        "b": task_score_from_seeds("top1_acc", [0.5, 0.6, 0.7]).to_dict(),
    }
    assert all(math.isnan(v) for v in quality_q_interval(one_seed))
    assert all(math.isnan(v) for v in quality_q_interval(unequal))


def test_q_replicates_average_the_tasks_resample_by_resample_over_the_shortest():
    accuracy = np.array([0.5, 0.6, 0.7, 0.8])
    multilabel = np.array([0.1, 0.3])  # fewer resamples (unscorable ones skipped)
    assert quality_q_replicates([accuracy, multilabel]) == pytest.approx((0.3, 0.45))
    assert quality_q_replicates([accuracy, None]) == ()  # a seeded probe has none
    assert paired_interval((0.5, 0.6, 0.7), (0.4, 0.5, 0.6)) == pytest.approx((0.1, 0.1))
    assert paired_interval((0.5, 0.6), (0.5,)) is None
