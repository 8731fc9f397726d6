"""Per-task Q(R) laws (paper Sec. IV-H): a task with a ceiling is saturating, one without still rising,
one whose scores do not follow RankMe has no detectable trend (and no parameters shown)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest

from sweeps.laws.forms import SaturatingLaw
from sweeps.report.figures import plot_rankme_views
from sweeps.report.study_fits import CONVERGED_VIEW, fit_study_laws
from sweeps.report.task_laws import (
    NO_TREND,
    SATURATING,
    STILL_RISING,
    fit_task_laws,
    task_law_metrics,
    task_laws_markdown,
)

CEILING = {"q_inf": 0.70, "x_c": 10.0, "alpha": 0.6}  # saturates at 0.7
NO_CEILING = {"q_inf": 1.00, "x_c": 10.0, "alpha": 0.3}  # rises towards 1


def _table() -> pd.DataFrame:
    rng = np.random.default_rng(11)
    rankme = np.repeat(np.geomspace(20.0, 600.0, 8), 2)
    law = SaturatingLaw()
    return pd.DataFrame({
        "trial": [f"r{r:.0f}" for r in rankme], "rankme": rankme,
        "q": law.predict(CEILING, rankme) + rng.normal(0, 0.003, rankme.size),
        "score/ceiling": law.predict(CEILING, rankme) + rng.normal(0, 0.003, rankme.size),
        "score/no_ceiling": law.predict(NO_CEILING, rankme) + rng.normal(0, 0.003, rankme.size),
        "status": "ok", "converged": rankme > 50.0,
    })  # fmt: skip


@pytest.fixture(scope="module")
def laws():
    return fit_task_laws(_table(), min_distinct=4, n_bootstrap=60)


def test_tasks_are_classed_by_the_upper_end_of_q_inf_interval(laws):
    task_laws, skipped = laws
    assert skipped == {}
    ceiling, no_ceiling = task_laws["ceiling"], task_laws["no_ceiling"]
    assert ceiling.classification == SATURATING
    assert ceiling.fit.params["q_inf"] == pytest.approx(0.70, abs=0.01)
    assert ceiling.fit.ci["q_inf"][1] < 1.0
    assert no_ceiling.classification == STILL_RISING
    assert no_ceiling.fit.ci["q_inf"][1] >= 1.0 - 1e-6


def test_task_laws_become_a_table_metrics_and_class_tags(laws):
    task_laws, skipped = laws
    lines = "\n".join(task_laws_markdown(task_laws, skipped))
    assert "| task | Q_inf [95% CI] | R_C | alpha | R² | class |" in lines
    assert "| ceiling | 0.70" in lines and "still rising" in lines
    metrics, tags = task_law_metrics(task_laws)
    assert metrics["task_law/ceiling/q_inf"] == pytest.approx(0.70, abs=0.01)
    assert {"task_law/ceiling/q_inf_ci_high", "task_law/no_ceiling/r2", "task_law/ceiling/x_c"} <= set(metrics)
    assert tags == {"task_law/ceiling/class": SATURATING, "task_law/no_ceiling/class": STILL_RISING}


def test_converged_column_adds_fig_1b_view():
    table = _table()
    study = fit_study_laws(table, n_bootstrap=0)
    assert {"Q(R)", CONVERGED_VIEW} <= set(study.fits)
    assert study.fits[CONVERGED_VIEW].n_points == int(table["converged"].sum())
    figure = plot_rankme_views(table, study)
    assert [ax.get_title() for ax in figure.axes] == ["(a) all checkpoints", "(b) converged checkpoints"]
    assert CONVERGED_VIEW not in fit_study_laws(table.drop(columns="converged"), n_bootstrap=0).fits


def test_an_interval_pinned_at_the_bound_is_not_printed_as_a_precise_ceiling(laws):
    task_laws, _ = laws
    rising = task_laws["no_ceiling"]
    # As in the default study's pitch row: every bootstrap resample put Q_inf at its bound 1.
    pinned = dataclasses.replace(rising, fit=dataclasses.replace(rising.fit, ci={**rising.fit.ci, "q_inf": (1.0, 1.0)}))
    lines = task_laws_markdown({"pinned": pinned, "ceiling": task_laws["ceiling"]}, {})
    pinned_row = next(line for line in lines if line.startswith("| pinned |"))
    assert "no ceiling identified" in pinned_row and "[1.000, 1.000]" not in pinned_row
    ceiling_row = next(line for line in lines if line.startswith("| ceiling |"))
    low, high = task_laws["ceiling"].fit.ci["q_inf"]
    assert f"[{low:.3f}, {high:.3f}]" in ceiling_row


def test_a_task_whose_scores_do_not_follow_rankme_has_no_trend_and_no_parameters_shown():
    # As the default study's tasks: checkpoint scores scattered around 0.78 whatever RankMe is (the fit
    # there: R² 0.002, "saturating" at Q_inf 0.782 [0.775, 0.790] with alpha 11.8).
    table = _table()
    rng = np.random.default_rng(5)
    table["score/flat"] = 0.78 + rng.normal(0.0, 0.01, len(table))
    task_laws, skipped = fit_task_laws(table, min_distinct=4, n_bootstrap=30)
    assert skipped == {}
    flat = task_laws["flat"]
    assert flat.classification == NO_TREND and not flat.informative
    assert "Spearman" in flat.basis
    assert {law.classification for name, law in task_laws.items() if name != "flat"} == {SATURATING, STILL_RISING}
    row = next(line for line in task_laws_markdown(task_laws, skipped) if line.startswith("| flat |"))
    assert row.startswith(f"| flat | - | - | - | {flat.fit.r2:.3f} | no detectable trend (")
    metrics, tags = task_law_metrics(task_laws)
    assert tags["task_law/flat/class"] == NO_TREND
    assert [key for key in metrics if key.startswith("task_law/flat/")] == ["task_law/flat/r2"]
    assert "task_law/ceiling/alpha" in metrics
