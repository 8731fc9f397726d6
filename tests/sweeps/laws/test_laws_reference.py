"""The reference estimator (paper App. E) on the paper's own Table II points, and its bounds."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.optimize import curve_fit

from sweeps.laws.fits import fit_joint, fit_saturating
from sweeps.laws.forms import JointLaw, SaturatingLaw
from sweeps.laws.reference import QSpaceLaw

# Paper Table II: RankMe / HEAR of five Dasheng sizes at 100k and 700k steps.
TABLE_II = {
    "en768-12": ((201.865, 0.744), (342.007, 0.793)),
    "en1024-12": ((258.111, 0.753), (432.298, 0.800)),
    "en512-12": ((156.360, 0.719), (226.555, 0.765)),
    "en256-12": ((83.371, 0.662), (111.505, 0.720)),
    "en128-12": ((50.200, 0.619), (56.892, 0.633)),
}
RANKME = np.array([r for pair in TABLE_II.values() for r, _ in pair])
HEAR = np.array([q for pair in TABLE_II.values() for _, q in pair])


def _paper_curve_fit() -> np.ndarray:
    """What App. E describes: curve_fit, Q_inf in [0, 1], others > 0, 5000 evaluations."""

    def law(r, q_inf, r_c, alpha):
        return q_inf - (r_c / r) ** alpha

    params, _ = curve_fit(law, RANKME, HEAR, p0=[0.9, 10.0, 0.5], bounds=([0, 0, 0], [1, np.inf, np.inf]), maxfev=5000)
    return params


def test_reference_fit_on_table_ii_matches_the_converged_least_squares_fit():
    fit = fit_saturating(RANKME, HEAR, n_bootstrap=0, extrapolate=False)
    assert fit.estimator == "reference"
    assert fit.r2 > 0.95
    # evaluation.md: R_C ~ 2.0, alpha ~ 0.30, Q_inf = 1.0 at its bound, R^2 = 0.974, Q(300) = 0.776.
    assert fit.params["x_c"] == pytest.approx(2.0, abs=0.05)
    assert fit.params["alpha"] == pytest.approx(0.30, abs=0.005)
    assert fit.params["q_inf"] == pytest.approx(1.0, abs=1e-9)
    assert fit.r2 == pytest.approx(0.974, abs=5e-4)
    assert fit.predict(np.array([300.0]))[0] == pytest.approx(0.776, abs=1e-3)


def test_reference_fit_is_at_least_as_good_as_the_papers_curve_fit():
    q_inf, r_c, alpha = _paper_curve_fit()
    paper_sse = np.sum((HEAR - (q_inf - (r_c / RANKME) ** alpha)) ** 2)
    fit = fit_saturating(RANKME, HEAR, n_bootstrap=0, extrapolate=False)
    ours_sse = np.sum((HEAR - fit.predict(RANKME)) ** 2)
    assert ours_sse <= paper_sse * (1 + 1e-6)
    assert fit.params["alpha"] == pytest.approx(alpha, rel=1e-3)


def test_reference_has_no_best_observed_q_floor_on_q_inf():
    # A plateau at 0.70 with one high outlier: least squares puts Q_inf below that outlier.
    x = np.array([10.0, 20.0, 40.0, 80.0, 160.0, 320.0, 640.0])
    q = SaturatingLaw().predict({"q_inf": 0.70, "x_c": 5.0, "alpha": 2.0}, x)
    q[4] += 0.03
    reference = fit_saturating(x, q, n_bootstrap=0, extrapolate=False)
    alternative = fit_saturating(x, q, n_bootstrap=0, extrapolate=False, estimator="log_error")
    assert reference.params["q_inf"] < q.max() - 0.01
    assert alternative.params["q_inf"] >= q.max() - 1e-12


def test_reference_exponent_is_not_capped_at_two():
    x = np.geomspace(10.0, 100.0, 8)
    q = SaturatingLaw().predict({"q_inf": 0.80, "x_c": 5.0, "alpha": 3.0}, x)
    assert fit_saturating(x, q, n_bootstrap=0, extrapolate=False).params["alpha"] == pytest.approx(3.0, rel=1e-3)
    capped = fit_saturating(x, q, n_bootstrap=0, extrapolate=False, estimator="log_error")
    assert capped.params["alpha"] <= 2.0


def test_joint_reference_recovers_the_error_form_of_eq_7():
    truth = {"q_inf": 0.85, "alpha": 0.5, "n_c": 2e4, "alpha_n": 0.3, "d_c": 0.2, "alpha_d": 0.4}
    n_params, hours = (a.ravel() for a in np.meshgrid(np.geomspace(1e5, 1e7, 5), np.geomspace(1.0, 100.0, 4)))
    q = JointLaw().predict(truth, n_params, hours) + np.random.default_rng(3).normal(0.0, 0.002, n_params.size)
    fit = fit_joint(n_params, hours, q, n_bootstrap=0, extrapolate=False)
    assert fit.estimator == "reference" and fit.r2 > 0.99
    assert fit.params["alpha_n"] == pytest.approx(0.3, abs=0.05)
    assert fit.params["alpha_d"] == pytest.approx(0.4, abs=0.05)


def test_reference_bounds_are_app_e_q_inf_in_0_1_others_positive():
    form = QSpaceLaw(SaturatingLaw())
    (low_log_error, high_log_error), log_a, alpha = form.bounds(HEAR)
    # log(1 - Q_inf) in [floor, 0]: Q_inf from 0 (log 1) to 1 (up to e^-30).
    assert form.params_from_theta(np.array([high_log_error, 0.0, 1.0]))["q_inf"] == 0.0
    assert form.params_from_theta(np.array([low_log_error, 0.0, 1.0]))["q_inf"] == pytest.approx(1.0, abs=1e-12)
    assert log_a == (None, None)  # X_c = exp(log A / alpha) > 0 by construction
    assert alpha[0] > 0 and alpha[1] is None  # "greater than 0", no upper cap
