"""Degenerate inputs fail with a message naming the problem; early prediction on a hand example."""

from __future__ import annotations

import numpy as np
import pytest

from sweeps.laws.fits import (
    fit_chinchilla,
    fit_joint,
    fit_saturating,
)
from sweeps.report.early_prediction import pearson_early_prediction, simulate_rankme_early_stop

X = np.array([10.0, 20.0, 40.0, 80.0, 160.0, 320.0])
Q = np.array([0.40, 0.50, 0.57, 0.62, 0.65, 0.67])


def test_fewer_than_five_points_is_rejected():
    with pytest.raises(ValueError, match="at least 5 points"):
        fit_saturating(X[:4], Q[:4])


def test_non_finite_values_are_rejected():
    with pytest.raises(ValueError, match="q has 1 non-finite"):
        fit_saturating(X, np.where(np.arange(6) == 2, np.nan, Q))


def test_non_positive_scale_is_rejected():
    with pytest.raises(ValueError, match="x must be positive"):
        fit_saturating(np.where(np.arange(6) == 0, 0.0, X), Q)
    with pytest.raises(ValueError, match="d must be positive"):
        fit_joint(X, -X, Q)


def test_quality_outside_unit_interval_is_rejected():
    with pytest.raises(ValueError, match=r"q must lie in \[0, 1\]"):
        fit_saturating(X, Q * 2.0)


def test_mismatched_lengths_are_rejected():
    with pytest.raises(ValueError, match="one per trial"):
        fit_chinchilla(X, X[:5], Q + 2.0)


def test_early_prediction_hand_example():
    # Without train_steps each trial's largest logged step is its horizon and is never correlated
    # (Table III pairs early RankMe with the final Q, never the final step with itself).
    histories = [
        {100: 1.0, 200: 40.0},
        {100: 2.0, 200: 30.0},
        {100: 3.0, 200: 20.0, 300: 5.0},
        [(100, 4.0), (200, 10.0)],
    ]
    final_q = [0.1, 0.2, 0.3, 0.5]
    table = pearson_early_prediction(histories, final_q)
    # Fraction 0.5 (step 100 of 200) in trials 1, 2, 4: x = 1, 2, 4; y = 1, 2, 5 (x0.1);
    # r = (57/9) / sqrt((42/9) (78/9)). Trial 3 (horizon 300) has fractions 1/3 and 2/3 alone.
    assert list(table["fraction"]) == [0.5]
    assert table["pearson_r"].iloc[0] == pytest.approx(57 / np.sqrt(42 * 78))
    assert list(table["n_trials"]) == [3] and table["steps"].iloc[0] == "100"


def test_simulated_early_stop_counts_saved_steps_and_best_survival():
    # Four trials of 100 steps; RankMe at step 25 ranks them d > c > b > a; final Q ranks c best.
    histories = [{25: 1.0, 100: 5.0}, {25: 2.0, 100: 6.0}, {25: 3.0, 100: 7.0}, {25: 4.0, 100: 8.0}]
    table = simulate_rankme_early_stop(histories, [0.1, 0.2, 0.9, 0.5], ["a", "b", "c", "d"])
    row = table.iloc[0]
    assert row["step"] == 25 and row["trials_kept"] == 2
    assert row["steps_saved_fraction"] == pytest.approx(2 * 75 / 400)  # a and b stop 75 steps early
    assert bool(row["best_kept"])
    worse = simulate_rankme_early_stop(histories, [0.9, 0.2, 0.3, 0.5], ["a", "b", "c", "d"])
    assert not bool(worse.iloc[0]["best_kept"])


def test_a_misspelt_fit_setting_is_rejected_by_name():
    with pytest.raises(TypeError, match="n_boot"):
        fit_saturating(X, Q, n_boot=0)
