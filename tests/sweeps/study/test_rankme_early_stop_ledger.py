"""Trials stopped by the live RankMe scheduler in the MLflow ledger: stopped_early, unfitted, not re-run."""

from __future__ import annotations

import pytest

from pipeline.tracking import runs as tracking
from sweeps.record.keys import ERROR_TAG, STATUS_TAG, STOPPED_AT_STEP_TAG
from sweeps.study.driver import StudyConfig, run_study
from tests.support.synthetic_curves import RANKME_LEVEL

CURVE_RUNNER = "tests.support.synthetic_curves:run_curve_trial"
PLANNED_STEPS = 300  # the mask_ratio grid's cpu_default; RankMe at 21, 43, 86, 129, 300 (Table III's fractions)
CHECK_STEP = 86  # the first RankMe step at or after 25% of the steps


def _study(tmp_path, **changes):
    settings = {
        "grid": "mask_ratio", "study_name": "masks-es", "tracking_uri": f"sqlite:///{tmp_path / 'mlflow.db'}",
        "storage_path": str(tmp_path / "ray"), "runner": CURVE_RUNNER, "prepare_shards": False, "n_bootstrap": 20,
        "max_concurrent": 1, "rankme_early_stop": True, "early_stop_min_samples": 2,
    }  # fmt: skip
    return run_study(StudyConfig(**{**settings, **changes}))


@pytest.mark.ray
def test_stopped_trials_are_recorded_stopped_early_left_out_of_fits_and_not_rerun(ray_local, tmp_path):
    outcome = _study(tmp_path)
    # Levels in grid order 60, 20, 50, 10, 40; the default rule keeps the top 40% of those seen so far:
    # 20 (1 of 2 kept), 10 (2 of 4) and 40 (2 of 5) are stopped - the replay's 3 of 5, 43% saved.
    low = sorted(name for name, level in RANKME_LEVEL.items() if level < 50.0)
    assert outcome.trials_failed == []
    assert sorted(outcome.early_stop.stopped_at_step) == low
    assert set(outcome.early_stop.stopped_at_step.values()) == {CHECK_STEP}
    expected_saved = len(low) * (PLANNED_STEPS - CHECK_STEP) / (len(RANKME_LEVEL) * PLANNED_STEPS)
    assert outcome.early_stop.steps_saved_fraction == pytest.approx(expected_saved)
    assert outcome.early_stop.best_finished == max(RANKME_LEVEL, key=RANKME_LEVEL.get)
    assert not outcome.early_stop.best_changed
    assert expected_saved == pytest.approx(3 * 214 / 1500)
    assert f"Steps saved: {100 * expected_saved:.0f}% of planned steps" in outcome.report_markdown
    assert outcome.fits.n_trials_used == len(RANKME_LEVEL) - len(low)

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    children = {run["params"]["trial"]: run for run in tracking.list_child_runs(uri, outcome.parent_run_id)}
    assert len(children) == len(RANKME_LEVEL)
    for name in low:
        run = children[name]
        assert run["tags"][STATUS_TAG] == "stopped_early" and run["tags"][STOPPED_AT_STEP_TAG] == str(CHECK_STEP)
        assert run["status"] == "FINISHED" and ERROR_TAG not in run["tags"]
        assert "q" not in run["metrics"]
        steps = [step for step, _ in run["metrics"]["rankme"]]
        assert CHECK_STEP in steps and max(steps) < PLANNED_STEPS
    assert all(children[n]["tags"][STATUS_TAG] == "ok" for n in RANKME_LEVEL if n not in low)

    resumed = _study(tmp_path, resume=True)
    assert resumed.trials_run == [] and len(resumed.trials_skipped) == len(RANKME_LEVEL)
    executions = (tmp_path / "ray" / "executions.txt").read_text().split()
    assert sorted(executions) == sorted(RANKME_LEVEL)  # nobody ran twice
    assert sorted(resumed.early_stop.stopped_at_step) == low
