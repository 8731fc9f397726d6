"""Law fits recover known parameters from noisy synthetic studies, with intervals covering them."""

from __future__ import annotations

import numpy as np
import pytest

from sweeps.laws.fits import fit_joint, fit_saturating
from sweeps.laws.forms import JointLaw, SaturatingLaw
from sweeps.laws.optimizer import information_criteria, r_squared, resample_groups

TRUE_SATURATING = {"q_inf": 0.80, "x_c": 10.0, "alpha": 0.6}
TRUE_JOINT = {"q_inf": 0.85, "alpha": 0.5, "n_c": 2e4, "alpha_n": 0.3, "d_c": 0.2, "alpha_d": 0.4}


def _saturating_study(noise_sd: float, seeds_per_config: int = 3, seed: int = 1):
    rankme = np.repeat(np.geomspace(20.0, 600.0, 8), seeds_per_config)
    q = SaturatingLaw().predict(TRUE_SATURATING, rankme)
    return rankme, q + np.random.default_rng(seed).normal(0.0, noise_sd, len(q))


def test_saturating_fit_recovers_parameters_with_covering_intervals():
    rankme, q = _saturating_study(noise_sd=0.005)
    fit = fit_saturating(rankme, q, n_bootstrap=100, extrapolate=False)
    for name, truth in TRUE_SATURATING.items():
        low, high = fit.ci[name]
        assert low <= truth <= high, (name, truth, fit.ci[name])
        assert fit.params[name] == pytest.approx(truth, rel=0.1)
    assert high - low < 0.2  # alpha's interval is informative, not the whole (0, 2] range
    assert fit.r2 > 0.99
    assert fit.diagnostics.n_agreeing >= 2 and fit.diagnostics.n_bootstrap_failed == 0


def test_log_error_fit_respects_q_inf_at_least_best_observed():
    # That bound belongs to the log-error alternative; the reference (the default) has App. E's only.
    rankme, q = _saturating_study(noise_sd=0.01, seed=7)
    fit = fit_saturating(rankme, q, n_bootstrap=0, extrapolate=False, estimator="log_error")
    assert fit.params["q_inf"] >= q.max() - 1e-12
    assert 0.0 < fit.params["alpha"] <= 2.0


def test_noiseless_fit_predicts_the_held_out_largest_scale():
    rankme, q = _saturating_study(noise_sd=0.0, seeds_per_config=1)
    fit = fit_saturating(rankme, q, n_bootstrap=0)
    assert fit.extrapolation_error < 1e-4
    np.testing.assert_allclose(fit.predict(rankme), q, atol=1e-6)


def test_joint_fit_recovers_parameters_with_covering_intervals():
    n_params, hours = (a.ravel() for a in np.meshgrid(np.geomspace(1e5, 1e7, 5), np.geomspace(1.0, 100.0, 4)))
    n_params, hours = np.repeat(n_params, 2), np.repeat(hours, 2)
    q = JointLaw().predict(TRUE_JOINT, n_params, hours)
    q = q + np.random.default_rng(3).normal(0.0, 0.003, len(q))
    # Six parameters: 99% intervals, so that all six cover together with probability >= 94%.
    fit = fit_joint(n_params, hours, q, n_bootstrap=100, ci_level=0.99, extrapolate=False)
    for name, truth in TRUE_JOINT.items():
        low, high = fit.ci[name]
        assert low <= truth <= high, (name, truth, fit.ci[name])
    assert fit.params["alpha_n"] == pytest.approx(0.3, abs=0.03)
    assert fit.params["alpha_d"] == pytest.approx(0.4, abs=0.04)
    assert fit.r2 > 0.99


def test_joint_law_rises_towards_q_inf_with_model_and_data():
    law = JointLaw()
    small, large = law.predict(TRUE_JOINT, 1e5, 1.0), law.predict(TRUE_JOINT, 1e9, 1e4)
    assert small < large < TRUE_JOINT["q_inf"]


def test_bootstrap_draws_whole_configurations():
    groups = np.repeat(np.arange(6), 3)  # six configurations, three seeds each
    indices = resample_groups(groups, np.random.default_rng(0))
    assert len(indices) == 18
    drawn = groups[indices]
    for configuration in np.unique(drawn):
        assert np.sum(drawn == configuration) % 3 == 0


def test_information_criteria_follow_the_gaussian_formulas():
    residuals = np.array([0.1, -0.2, 0.05, 0.0, 0.15, -0.1])
    aicc, bic = information_criteria(residuals, n_params=3)
    rss, n = float(np.sum(residuals**2)), 6
    assert aicc == pytest.approx(n * np.log(rss / n) + 6 + 24 / 2)
    assert bic == pytest.approx(n * np.log(rss / n) + 3 * np.log(6))


def test_r_squared_is_formula_8_and_undefined_when_q_does_not_vary():
    """Paper App. E, Formula (8): 1 - RSS/TSS. y = [1, 2, 3, 4] against [1, 2, 3, 5]: RSS 1, TSS 5."""
    assert r_squared(np.array([1.0, 2.0, 3.0, 4.0]), np.array([1.0, 2.0, 3.0, 5.0])) == pytest.approx(0.8)
    assert r_squared(np.array([1.0, 2.0, 3.0]), np.array([2.0, 2.0, 2.0])) == 0.0  # the mean explains nothing
    with np.errstate(all="raise"):  # a constant Q is neither a warning nor -inf
        assert np.isnan(r_squared(np.full(4, 0.6), np.array([0.5, 0.6, 0.6, 0.7])))
        # Three trials at a 10-class task's chance level: their float mean is not exactly 0.1.
        assert np.isnan(r_squared(np.full(3, 0.1), np.array([0.09, 0.1, 0.11])))
