"""The leave-largest-out extrapolation error explains itself when it cannot be computed."""

from __future__ import annotations

import math
import re

import numpy as np

from sweeps.laws.fits import fit_saturating
from sweeps.report.markdown import fit_table_markdown
from sweeps.report.study_fits import StudyFits

X = np.array([10.0, 20.0, 40.0, 80.0, 160.0, 320.0])
Q = np.array([0.40, 0.50, 0.57, 0.62, 0.65, 0.67])


def _table_for(fit) -> str:
    return fit_table_markdown(StudyFits(fits={"Q(R)": fit}, skipped={}, n_trials_used=fit.n_points, n_trials_failed=0))


def test_five_points_leave_four_and_the_fit_says_so_instead_of_nan():
    fit = fit_saturating(X[:5], Q[:5], n_bootstrap=0)
    assert math.isnan(fit.extrapolation_error)
    assert fit.extrapolation_note == (
        "not computed: 4 points remain after leaving out the largest scale (1 point(s)), fits need >= 5"
    )
    assert fit.to_dict()["extrapolation_note"] == fit.extrapolation_note
    table = _table_for(fit)
    assert f"| {fit.extrapolation_note} |" in table
    assert not re.search(r"\bnan\b", table, re.IGNORECASE)
    assert "no bootstrap intervals: the fit was run without bootstrap resamples" in table


def test_six_points_give_a_finite_error_printed_as_a_number():
    fit = fit_saturating(X, Q, n_bootstrap=0)
    assert np.isfinite(fit.extrapolation_error) and fit.extrapolation_error < 0.05
    assert f"| {fit.extrapolation_error:.4f}" in _table_for(fit)


def test_switched_off_extrapolation_is_named():
    fit = fit_saturating(X, Q, n_bootstrap=0, extrapolate=False)
    assert math.isnan(fit.extrapolation_error)
    assert fit.extrapolation_note == "not computed: extrapolation was switched off"
