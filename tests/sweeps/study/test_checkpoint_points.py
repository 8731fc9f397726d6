"""A trial's checkpoints as (R, Q) points: logged per step, read back, expanded, and fitted as Q(R)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from pipeline.tracking import runs as tracking
from sweeps.laws.forms import SaturatingLaw
from sweeps.record.checkpoint_point import Q_DECIMALS, CheckpointPoint
from sweeps.record.keys import STUDY_EXPERIMENT
from sweeps.record.study import read_study
from sweeps.record.trial import TrialRecord
from sweeps.report.checkpoints import STEP_COLUMN, checkpoint_rows
from sweeps.report.markdown import study_markdown
from sweeps.report.study_fits import fit_study_laws

TRUE_Q_OF_R = {"q_inf": 0.7, "x_c": 15.0, "alpha": 0.8}
STEPS = (0, 7, 14, 29, 43, 100)


def _trial(name: str, rankmes: list[float]) -> TrialRecord:
    law = SaturatingLaw()
    points = {
        step: CheckpointPoint(
            rankme=r,
            q=(q := float(law.predict(TRUE_Q_OF_R, r))),
            task_scores={"tones": 0.5 + step / 1000},
            q_ci=(q - 0.02, q + 0.02),
        )
        for step, r in zip(STEPS, rankmes)
    }
    last = points[STEPS[-1]]
    return TrialRecord(
        trial=name, model_name="mae-debug", arch="mae", n_params=1000, hours=3.0, flops=1e12, mask_ratio=0.75,
        rankme=last.rankme, rankme_by_step=dict(zip(STEPS, rankmes)), q=last.q, task_scores=last.task_scores,
        q_ci_low=last.q - 0.01, q_ci_high=last.q + 0.01, q_interval_over="test clips", checkpoint_points=points,
    )  # fmt: skip


def _logged_table(tracking_uri: str, trials: list[TrialRecord]) -> pd.DataFrame:
    parent = tracking.start_or_resume_run(tracking_uri=tracking_uri, experiment_name=STUDY_EXPERIMENT, run_name="s")
    for trial in trials:
        child = tracking.start_or_resume_run(
            tracking_uri=tracking_uri, experiment_name=STUDY_EXPERIMENT, run_name=f"s/{trial.trial}",
            parent_run_id=parent.run_id,
        )  # fmt: skip
        trial.write(child)
        child.finish()
    parent.finish()
    return read_study(tracking_uri, "s").trial_table


def test_every_checkpoint_is_logged_at_its_step_and_read_back(tracking_uri):
    trial = _trial("mask0.50", [27.0, 26.0, 24.0, 22.0, 21.0, 20.5])
    table = _logged_table(tracking_uri, [trial])
    row = table.iloc[0]
    # Q is stored to Q_DECIMALS (what the MLflow UI shows is what is stored); the last checkpoint is the trial's.
    assert row["q"] == round(trial.q, Q_DECIMALS) and row["rankme"] == pytest.approx(20.5)
    assert row["q"] != trial.q  # the law's value has more digits than 4: the rounding is seen
    points = row["checkpoint_points"]
    assert sorted(points) == list(STEPS)
    assert points[14]["rankme"] == pytest.approx(24.0)
    assert points[14]["q"] == round(trial.checkpoint_points[14].q, Q_DECIMALS)
    assert points[43]["score/tones"] == pytest.approx(0.543)
    # Every checkpoint keeps its own Q interval (the kNN probe's test-clip bootstrap), and says what it resamples.
    assert points[14]["q_ci_high"] - points[14]["q_ci_low"] == pytest.approx(0.04)
    assert row["q_interval_over"] == "test clips"
    rows = checkpoint_rows(table)
    assert (rows["q_ci_high"] - rows["q_ci_low"]).round(6).tolist() == [0.04] * 5 + [0.02]


def test_checkpoint_rows_keep_the_trial_as_bootstrap_unit_and_no_interval_where_none_was_logged():
    trials = pd.DataFrame([{
        "trial": "a", "q": 0.6, "rankme": 20.0, "q_ci_low": 0.55, "q_ci_high": 0.65, "configuration": None,
        "checkpoint_points": {0: {"rankme": 27.0, "q": 0.5}, 100: {"rankme": 20.0, "q": 0.6}},
    }])  # fmt: skip
    rows = checkpoint_rows(trials)
    assert list(rows["trial"]) == ["a", "a"] and list(rows[STEP_COLUMN]) == [0, 100]
    assert list(rows["configuration"]) == ["a", "a"] and list(rows["is_last"]) == [False, True]
    assert np.isnan(rows["q_ci_low"].iloc[0]) and rows["q_ci_low"].iloc[1] == 0.55
    assert list(rows["rankme"]) == [27.0, 20.0]


def test_q_of_r_is_fitted_over_every_checkpoint(tracking_uri):
    # 3 trials x 6 checkpoints = 18 points on a known law: recovered; 3 final points alone would be too few.
    trials = [_trial(f"t{i}", list(np.geomspace(300.0 - 50 * i, 40.0 + 10 * i, len(STEPS)))) for i in range(3)]
    table = _logged_table(tracking_uri, trials)
    study = fit_study_laws(table, n_bootstrap=20)
    fit = study.fits["Q(R)"]
    assert fit.n_points == 18
    assert fit.params["alpha"] == pytest.approx(0.8, rel=0.05)
    assert fit.r2 > 0.99
    # The report's headline names the best of every checkpoint, not only of the last ones.
    report = study_markdown("s", table, study, [])
    assert "3 finished trial rows were fitted (18 evaluated checkpoints" in report
    best = max(trials, key=lambda t: max(p.q for p in t.checkpoint_points.values()))
    assert f"Best of all evaluated checkpoints: {best.trial} at step 0," in report  # R falls with steps here


def test_a_study_whose_trials_all_failed_reports_too_few_points():
    failed = pd.DataFrame([{"trial": f"m{i}", "q": np.nan, "rankme": np.nan, "status": "failed",
                            "checkpoint_points": {}} for i in range(5)])  # fmt: skip
    study = fit_study_laws(failed, n_bootstrap=5)
    assert study.fits == {} and "Q(R)" in study.skipped and study.n_trials_failed == 5


def test_a_resumed_trial_logs_each_step_s_rankme_once(tmp_path):
    """Ctrl-C during a study's first trial, then --resume: the first attempt's pretraining had logged R
    at step 0; the resumed pretraining reports only the steps it ran, so writing the trial's step-0
    checkpoint point logged R at step 0 a second time."""
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    run = tracking.start_or_resume_run(tracking_uri=uri, experiment_name=STUDY_EXPERIMENT, run_name="mask0.50@s")
    run.log_metrics({"rankme": 21.5}, step=0)  # the first attempt, killed after its initialisation point
    TrialRecord(
        trial="mask0.50", model_name="mae-debug", arch="mae", n_params=1000, hours=3.0, flops=1e12, mask_ratio=0.5,
        rankme=30.0, rankme_by_step={150: 27.0, 300: 30.0}, rankme_history_logged=True, q=0.58,
        checkpoint_points={0: CheckpointPoint(rankme=21.4, q=0.55), 150: CheckpointPoint(rankme=27.0, q=0.57)},
    ).write(run)  # fmt: skip
    history = tracking.read_run(uri, run.run_id)["metrics"]
    steps = [step for step, _ in history["rankme"]]
    assert sorted(steps) == sorted(set(steps)), f"a step's R logged twice: {history['rankme']}"
    assert dict(history["rankme"])[0] == 21.5 and [step for step, _ in history["q"]] == [0, 150, 300]
