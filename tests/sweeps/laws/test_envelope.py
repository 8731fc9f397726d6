"""Q(C) is the curve no run surpasses (paper Sec. IV-E, Fig. 5a), not a regression through the frontier."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from sweeps.laws.envelope import ENVELOPE, ENVELOPE_TOLERANCE, envelope_shortfall, fit_envelope
from sweeps.laws.fits import fit_saturating
from sweeps.laws.frontier import frontier_mask
from sweeps.report.study_fits import fit_study_laws

# Eq. 6 with Q_inf 0.80, C_c 500, alpha 0.5; the frontier points scatter by up to 0.02 on both
# sides, and three runs below the frontier (of other sizes) never set a new best.
COMPUTE = np.array([1e3, 2e3, 4e3, 8e3, 1.6e4, 3.2e4, 6.4e4, 1.28e5, 3e3, 2.4e4, 9e4])
NOISE = np.array([0.0, 0.02, -0.01, 0.015, -0.01, 0.012, -0.005, 0.004, -0.05, -0.04, -0.03])
Q = 0.8 - (5e2 / COMPUTE) ** 0.5 + NOISE


def test_least_squares_on_the_frontier_cuts_under_a_run_and_the_envelope_does_not():
    on = frontier_mask(COMPUTE, Q)
    least_squares = fit_saturating(COMPUTE[on], Q[on], n_bootstrap=0)
    # The premise: a plain fit leaves a run 0.028 above the curve (the one at C = 2e3).
    assert envelope_shortfall(least_squares, COMPUTE, Q) > 0.02
    envelope = fit_envelope(COMPUTE, Q, n_bootstrap=0)
    assert envelope.estimator == ENVELOPE
    assert envelope_shortfall(envelope, COMPUTE, Q) <= ENVELOPE_TOLERANCE + 1e-9
    # It touches the highest run: no looser than needed.
    assert envelope_shortfall(envelope, COMPUTE, Q) >= ENVELOPE_TOLERANCE - 1e-4
    assert envelope.params["q_inf"] == pytest.approx(0.8, abs=0.03)
    assert envelope.params["alpha"] == pytest.approx(0.5, abs=0.1)


def test_every_bootstrap_replicate_is_itself_an_envelope_of_its_resample_and_intervals_hold_the_estimate():
    envelope = fit_envelope(COMPUTE, Q, n_bootstrap=60, seed=3)
    assert envelope.diagnostics.n_bootstrap + envelope.diagnostics.n_bootstrap_failed == 60
    assert envelope.diagnostics.n_bootstrap >= 50
    for name, (low, high) in envelope.ci.items():
        assert low <= envelope.params[name] <= high, name
    # Each replicate clears the runs it was fitted to; over all runs it stays close to doing so.
    curves = [envelope.form.predict(row, COMPUTE) for row in envelope.replicates.to_dict("records")]
    assert np.median([np.max(Q - curve) for curve in curves]) < 0.03


def test_the_study_report_fits_q_of_c_as_the_envelope_over_every_trial():
    rows = []
    for size, scale in ((1e5, 1.0), (1e6, 4.0), (1e7, 16.0)):
        for steps in (1, 2, 4, 8, 16):
            compute = 6.0 * size * steps * 1e3
            q = 0.8 - (3e8 / compute) ** 0.4 - 0.02 * np.log(scale) * (steps < 4)
            rows.append({"trial": f"s{size:.0e}-{steps}", "flops": compute, "n_params": size, "q": q,
                         "rankme": 10.0 + steps, "status": "ok"})  # fmt: skip
    table = pd.DataFrame(rows)
    table.loc[3, "q"] += 0.015  # one run above a smooth curve
    study = fit_study_laws(table, n_bootstrap=10, grid="size,compute")
    fit = study.fits["Q(C)"]
    assert fit.estimator == ENVELOPE
    assert envelope_shortfall(fit, table["flops"], table["q"]) <= ENVELOPE_TOLERANCE + 1e-9
    assert "Q(C)" in study.alternatives and study.alternatives["Q(C)"].estimator == "log_error"
