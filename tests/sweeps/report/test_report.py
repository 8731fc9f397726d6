"""Study fits, figures and the markdown report on a synthetic size x data_volume trial table."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest

from sweeps.laws.forms import JointLaw
from sweeps.report.figures import study_figures
from sweeps.report.markdown import study_markdown
from sweeps.report.study_fits import fit_study_laws

TRUE_JOINT = {"q_inf": 0.85, "alpha": 0.5, "n_c": 2e4, "alpha_n": 0.3, "d_c": 0.2, "alpha_d": 0.4}


def _synthetic_table() -> pd.DataFrame:
    rng = np.random.default_rng(5)
    rows = []
    for n_params in np.geomspace(1e5, 1e7, 5):
        for hours in np.geomspace(1.0, 100.0, 4):
            for _seed in range(2):
                q = float(JointLaw().predict(TRUE_JOINT, n_params, hours)) + rng.normal(0.0, 0.003)
                # RankMe consistent with Q(R) = 0.9 - (8 / R)^0.7, plus noise
                rankme = 8.0 / (0.9 - q) ** (1.0 / 0.7) * np.exp(rng.normal(0.0, 0.02))
                rows.append(
                    {
                        "trial": f"n{n_params:.0e}-h{hours:.3g}",
                        "n_params": n_params,
                        "hours": hours,
                        "flops": 6.0 * n_params * hours * 3.6e5,
                        "mask_ratio": 0.8,
                        "arch": "mae",
                        "rankme": rankme,
                        "rankme_by_step": {100: rankme * 0.5 + rng.normal(0, 5), 200: rankme},
                        "q": q,
                        "score/esc50": q - 0.05,
                        "score/speech_commands": q + 0.02,
                        "status": "ok",
                    }
                )
    rows.append({**rows[0], "q": float("nan"), "status": "failed"})
    return pd.DataFrame(rows)


@pytest.fixture(scope="module")
def table_and_fits():
    table = _synthetic_table()
    return table, fit_study_laws(table, n_bootstrap=20)


def test_study_fits_every_supported_law_and_leaves_out_failed_trials(table_and_fits):
    table, study = table_and_fits
    assert set(study.fits) == {"Q(R)", "Q(N)", "Q(D)", "Q(C)", "Q(N,D)"}
    assert study.n_trials_failed == 1 and study.n_trials_used == len(table) - 1
    assert study.fits["Q(N,D)"].params["alpha_n"] == pytest.approx(0.3, abs=0.05)
    assert study.fits["Q(R)"].params["alpha"] == pytest.approx(0.7, abs=0.15)


def test_single_variable_study_says_why_laws_were_skipped():
    table = _synthetic_table()
    table = table[(table["n_params"] == table["n_params"].max()) & (table["hours"] == table["hours"].max())]
    study = fit_study_laws(table, n_bootstrap=0)
    assert "only 1 distinct parameters N" in study.skipped["Q(N)"]
    assert "Q(N,D)" in study.skipped and not study.fits


def test_figures_render_with_fit_and_band(table_and_fits, tmp_path):
    table, study = table_and_fits
    figures = study_figures(table, study)
    assert set(figures) == {
        "quality_vs_rankme.png",
        "quality_vs_scale.png",
        "quality_isolines_n_d.png",
        "early_rankme_vs_final_q.png",
    }
    rankme_axes = figures["quality_vs_rankme.png"].axes[0]
    assert len(rankme_axes.lines) >= 1 and len(rankme_axes.collections) >= 2  # points + interval band
    for name, figure in figures.items():
        figure.savefig(tmp_path / name)
        assert (tmp_path / name).stat().st_size > 5_000


def test_markdown_report_states_fits_correlations_and_failures(table_and_fits):
    table, study = table_and_fits
    markdown = study_markdown("size_x_data", table, study, ["quality_vs_rankme.png"])
    assert "# Scaling study `size_x_data`" in markdown
    assert "| Q(N,D) |" in markdown and re.search(r"alpha_n 0\.(29|30|31)", markdown)
    assert "1 failed or unscored row(s) were left out" in markdown
    # Early prediction by fraction of the horizon: step 100 of 200; step 200 is the final checkpoint
    # and is never correlated with itself (paper Table III), so it has no row.
    assert "| 0.5000 | 100 | " in markdown and "| 1.0000 |" not in markdown
    assert "| 50k | 0.0714 | 0.636 |" in markdown  # the paper's Table III beside ours
    assert "- Q(R) converged not fitted: the trial table has no `converged` column" in markdown
    assert "- Q(C) frontier (Sec. IV-E, Fig. 5a): " in markdown
    assert "## Per-task Q(R) laws (paper Sec. IV-H)" in markdown and "| esc50 | " in markdown
    # 40 trial rows: the default rule keeps ceil(0.4 x 40) = 16 at step 100 (the decision step of 200).
    assert "RankMe early stopping, replayed on the finished trials" in markdown and "| 100 | 16 |" in markdown
    assert "keep the top 40% by RankMe (16 of 40" in markdown
    assert "| esc50 |" in markdown
    assert "![Q(R)](quality_vs_rankme.png)" in markdown  # relative to report.md by default


def test_a_failed_cross_check_is_reported_not_dropped(monkeypatch):
    """The log-error alternative failing must show in the report, not read as 'no disagreement'."""
    import sweeps.report.study_fits as report_fits
    from sweeps.laws.optimizer import FitNotConvergedError

    real = report_fits.fit_saturating

    def alternative_fails(*args, **kwargs):
        if kwargs.get("estimator") == report_fits.LOG_ERROR:
            raise FitNotConvergedError("saturating fit did not converge: projected gradient 1.0e-02")
        return real(*args, **kwargs)

    monkeypatch.setattr(report_fits, "fit_saturating", alternative_fails)
    table = _synthetic_table()
    study = fit_study_laws(table, n_bootstrap=0)
    assert "Q(R)" in study.fits and "Q(R)" not in study.alternatives
    assert study.fit_failures["Q(R)"].startswith("the log-error cross-check failed: saturating fit did not converge")
    markdown = study_markdown("s", table, study, [])
    assert "- Q(R): the log-error cross-check failed: saturating fit did not converge" in markdown


def test_q_of_n_and_q_of_d_use_the_papers_slices_where_the_grid_holds_them():
    """Sec. IV-C: Q(D) on en768-12; Sec. IV-D: Q(N) at 10,666 h. Otherwise the largest, said in the report."""
    from sweeps.report.study_fits import PAPER_Q_OF_D_MODEL, PAPER_Q_OF_N_HOURS, law_slice
    from sweeps.study.grids import PAPER_SIZE_COMPUTE_HOURS

    assert PAPER_Q_OF_N_HOURS == PAPER_SIZE_COMPUTE_HOURS
    rows = [
        {"model_name": model, "n_params": n, "hours": hours, "q": 0.5}
        for model, n in (("mae-en512-12", 6.4e7), (PAPER_Q_OF_D_MODEL, 1.1e8), ("mae-en1024-12", 1.8e8))
        for hours in (1_000.0, PAPER_Q_OF_N_HOURS, 50_000.0)
    ]
    table = pd.DataFrame(rows)
    q_of_d, note = law_slice(table, "hours")
    assert set(q_of_d["model_name"]) == {PAPER_Q_OF_D_MODEL} and "Sec. IV-C" in note
    q_of_n, note = law_slice(table, "n_params")
    assert set(q_of_n["hours"]) == {PAPER_Q_OF_N_HOURS} and "Sec. IV-D" in note
    # A CPU grid holds neither: the largest of the other axis, and the report says it is not the paper's.
    cpu = table.assign(model_name="mae-debug", hours=table["hours"] / 1e4)
    q_of_n, note = law_slice(cpu, "n_params")
    assert set(q_of_n["hours"]) == {5.0} and "the grid has no 10,666 h (Sec. IV-D) slice" in note
    one_axis = table[table["hours"] == 1_000.0]
    rows_used, note = law_slice(one_axis, "n_params")
    assert len(rows_used) == len(one_axis) and note == ""


def test_the_report_states_the_slice_of_q_of_n_and_q_of_d(table_and_fits):
    table, study = table_and_fits
    assert study.slices["Q(N)"].startswith("at the grid's largest hours (100 h)")
    markdown = study_markdown("s", table, study, [])
    assert "- Q(D) fitted at the grid's largest n_params" in markdown


def test_a_law_that_explains_none_of_the_variation_is_called_not_informative():
    from sweeps.report.markdown import _law_sentence

    table = _synthetic_table()
    fit = fit_study_laws(table, n_bootstrap=0).fits["Q(N,D)"]
    import dataclasses

    noise = dataclasses.replace(fit, r2=-430.7)
    sentence = _law_sentence("Q(N,D)", noise, table)
    assert sentence.startswith("- Q(N,D): not informative: the fit explains none of the variation in Q (R² -431 over")
    assert "saturated" not in sentence


def test_a_q_inf_interval_reaching_the_bound_claims_no_ceiling():
    """Q_inf 0.564 with a 95% interval 0.561-1.000 (the default study's Q(R)) is no evidence of
    saturation: the sentence and the summary's fit line state the low end and the bound, never
    "has saturated" or the interval as if it measured a ceiling."""
    import dataclasses

    from sweeps.report.markdown import _law_sentence
    from sweeps.report.summary import fit_line
    from sweeps.report.task_laws import SATURATING, STILL_RISING, classify

    table = _synthetic_table()
    study = fit_study_laws(table, n_bootstrap=0)
    fit = study.fits["Q(R)"]
    params = dict(fit.params, q_inf=0.564)
    open_ended = dataclasses.replace(fit, params=params, r2=0.002, ci={"q_inf": (0.561, 1.0 - 1e-9)})
    sentence = _law_sentence("Q(R)", open_ended, table)
    assert "has no established ceiling: Q_inf = 0.564, but its 95% interval runs from 0.561 to the bound 1" in sentence
    assert "saturated" not in sentence and "0.561-1.000" not in sentence
    line = fit_line(dataclasses.replace(study, fits={"Q(R)": open_ended}))
    assert "q_inf 0.564 (95% 0.561 to the bound 1: no ceiling established)" in line
    assert classify(open_ended)[0] == STILL_RISING
    # Positive control: an interval ending below 1 is still stated as a ceiling.
    closed = dataclasses.replace(open_ended, ci={"q_inf": (0.561, 0.570)})
    assert "(95% 0.561-0.570)" in _law_sentence("Q(R)", closed, table)
    assert classify(closed)[0] == SATURATING
