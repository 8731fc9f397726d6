"""Profile-likelihood interval for Q_inf."""

from __future__ import annotations

import numpy as np

from sweeps.laws.forms import SaturatingLaw
from sweeps.laws.profile import profile_q_inf_interval


def test_profile_interval_covers_true_q_inf_above_best_observed():
    rankme = np.repeat(np.geomspace(20.0, 600.0, 8), 3)
    q = SaturatingLaw().predict({"q_inf": 0.80, "x_c": 10.0, "alpha": 0.6}, rankme)
    q = q + np.random.default_rng(1).normal(0.0, 0.005, len(q))
    profile = profile_q_inf_interval(rankme, q)
    assert profile.low <= 0.80 <= profile.high
    assert q.max() <= profile.low and profile.high < 0.9


def test_profile_cannot_exclude_no_saturation_for_a_pure_power_law():
    rankme = np.geomspace(20.0, 600.0, 8)
    q = 1.0 - (rankme / 5.0) ** -0.3  # Q_inf = 1: no saturation in sight
    q = q * np.exp(np.random.default_rng(2).normal(0.0, 0.002, len(q)))
    profile = profile_q_inf_interval(rankme, q)
    assert profile.high == 1.0
