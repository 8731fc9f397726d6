"""Table III as the paper defines it: early RankMe against the final Q, at fractions of each horizon."""

from __future__ import annotations

import numpy as np
import pytest

from sweeps.report.early_prediction import (
    PAPER_TABLE_III,
    PAPER_TABLE_III_FINAL_STEP,
    pearson_early_prediction,
)

FINAL_Q = [0.50, 0.55, 0.60, 0.65, 0.70, 0.75]


def test_paper_table_iii_is_kept_with_its_steps():
    # Paper Table III: RankMe at 50k/100k/200k/300k steps against HEAR at 700k, 45 models.
    assert PAPER_TABLE_III == {50_000: 0.636, 100_000: 0.790, 200_000: 0.855, 300_000: 0.862}
    assert PAPER_TABLE_III_FINAL_STEP == 700_000


def test_the_final_step_is_never_correlated_with_itself():
    # RankMe at the final step equals the final Q's rank order exactly: a self-correlation would be r = 1.
    histories = [{50: 10.0 + i % 3, 100: 20.0 + i, 700: 100.0 * q} for i, q in enumerate(FINAL_Q)]
    table = pearson_early_prediction(histories, FINAL_Q, horizons=[700] * 6)
    assert 1.0 not in set(table["fraction"])
    assert "700" not in " ".join(table["steps"])
    assert list(table["fraction"]) == [round(50 / 700, 4), round(100 / 700, 4)]


def test_without_horizons_the_largest_logged_step_is_the_horizon_and_left_out():
    histories = [{50: 10.0 + i, 100: 100.0 * q} for i, q in enumerate(FINAL_Q)]
    table = pearson_early_prediction(histories, FINAL_Q)
    assert list(table["fraction"]) == [0.5] and table["steps"].iloc[0] == "50"


def test_trials_of_different_horizons_are_pooled_by_fraction():
    # Three trials of 700 steps log at 50 and 100; three of 1400 steps at 100 and 200:
    # 50/700 = 100/1400 and 100/700 = 200/1400, so each fraction pools all six trials.
    short = [{50: 1.0 + i, 100: 2.0 + i} for i in range(3)]
    long = [{100: 4.0 + i, 200: 5.0 + 2 * i} for i in range(3)]
    table = pearson_early_prediction(short + long, FINAL_Q, horizons=[700] * 3 + [1400] * 3)
    assert list(table["fraction"]) == [round(1 / 14, 4), round(2 / 14, 4)]
    assert list(table["n_trials"]) == [6, 6]
    assert list(table["steps"]) == ["50, 100", "100, 200"]
    assert table["pearson_r"].iloc[0] == pytest.approx(np.corrcoef([1, 2, 3, 4, 5, 6], FINAL_Q)[0, 1])
    # These are Table III's first two rows (50k/700k and 100k/700k): the paper's r rides along.
    assert list(table["paper_pcc"]) == [0.636, 0.790]


def test_a_planned_horizon_keeps_the_last_logged_step_when_it_is_not_the_final_one():
    histories = [{100: 1.0 + i, 600: 2.0 + i} for i in range(6)]
    table = pearson_early_prediction(histories, FINAL_Q, horizons=[700.0] * 5 + [float("nan")])
    # Five trials planned 700 steps keep step 600; the sixth (no plan) falls back to 600 as horizon.
    assert list(table["n_trials"]) == [5, 5]


def test_each_correlation_carries_its_fisher_interval():
    from sweeps.report.early_prediction import fisher_interval

    # The paper's 45 models at 300k: r 0.862 -> about 0.76-0.92; the default study's 5 trials at
    # r 0.83 span -0.20..0.99 (includes 0: no evidence either way); 3 pairs have no interval.
    assert fisher_interval(0.862, 45) == pytest.approx((0.761, 0.922), abs=0.002)
    low, high = fisher_interval(0.83, 5)
    assert low == pytest.approx(-0.20, abs=0.01) and high == pytest.approx(0.989, abs=0.002)
    assert all(np.isnan(fisher_interval(0.9, 3)))
    histories = [{50: 10.0 + i + (i % 2), 100: 20.0 + i} for i in range(6)]
    table = pearson_early_prediction(histories, FINAL_Q, horizons=[700] * 6)
    row = table.iloc[0]
    assert row["r_ci_low"] < row["pearson_r"] < row["r_ci_high"] <= 1.0
