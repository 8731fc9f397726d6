"""The live RankMe early-stop scheduler on real Ray Tune, against the offline simulation."""

from __future__ import annotations


import numpy as np
import pytest
from ray import tune
from ray.tune.experiment import Trial

from sweeps.early_prediction import simulate_rankme_early_stop
from sweeps.scaling import main
from sweeps.rankme_early_stop import (
    RankMeEarlyStopScheduler,
    check_step_for,
    rankme_every_steps_for,
    should_stop,
    summarize_early_stop,
)
from tests.sweeps.synthetic_curves import curve_trainable, scheduler_test_curve

TRAIN_STEPS = 40
# Tune runs these one at a time in this order; high and low levels alternate, a high one first.
LEVELS = {"a": 30.0, "b": 5.0, "c": 25.0, "d": 8.0}


def _run_tune(tmp_path, scheduler):
    tuner = tune.Tuner(
        tune.with_resources(curve_trainable, {"cpu": 0.5}),
        param_space={
            "trial": tune.grid_search([{"name": name, "train_steps": TRAIN_STEPS} for name in LEVELS]),
            "level": tune.sample_from(lambda spec: LEVELS[spec.config["trial"]["name"]]),
        },
        tune_config=tune.TuneConfig(scheduler=scheduler, max_concurrent_trials=1, reuse_actors=True),
        run_config=tune.RunConfig(storage_path=str(tmp_path), verbose=0),
    )
    return tuner.fit()


def test_check_step_is_first_rankme_step_at_or_after_a_quarter():
    assert check_step_for(100, rankme_every_steps=25, check_fraction=0.25) == 25
    assert check_step_for(100, rankme_every_steps=30, check_fraction=0.25) == 30
    assert check_step_for(10, rankme_every_steps=4, check_fraction=0.5) == 8
    assert check_step_for(3, rankme_every_steps=5, check_fraction=0.25) == 3  # capped at the last step


def test_rule_keeps_the_first_trials_and_stops_below_the_quantile():
    assert not should_stop(1.0, [9.0, 1.0], keep_fraction=0.5, min_samples=3)  # too few seen yet
    assert should_stop(1.0, [9.0, 5.0, 1.0], keep_fraction=0.5, min_samples=3)
    assert not should_stop(5.0, [9.0, 5.0, 1.0], keep_fraction=0.5, min_samples=3)  # at the median: kept
    # keep_fraction 0.25: only the top quarter continues (cut at the 0.75 quantile, 7.0 here).
    assert should_stop(6.0, [1.0, 5.0, 6.0, 9.0], keep_fraction=0.25, min_samples=1)


@pytest.mark.ray
def test_live_scheduler_stops_exactly_the_low_rankme_trials_and_matches_the_simulation(ray_local, tmp_path):
    scheduler = RankMeEarlyStopScheduler(keep_fraction=0.5, min_samples=2)
    results = _run_tune(tmp_path, scheduler)
    assert all(result.error is None for result in results)  # stopped, not failed

    check_step = check_step_for(TRAIN_STEPS, rankme_every_steps=rankme_every_steps_for(TRAIN_STEPS), check_fraction=0.25)
    low = sorted(name for name, level in LEVELS.items() if level < np.median(list(LEVELS.values())))
    stopped = scheduler.stopped_trials()
    assert sorted(stopped) == low
    assert {check.check_step for check in stopped.values()} == {check_step}
    last_step = {result.config["trial"]["name"]: result.metrics.get("step") for result in results}
    assert all(last_step[name] < TRAIN_STEPS for name in low)  # they really did stop early
    assert all(name in low or "q" in result.metrics for name, result in zip(last_step, results))

    curves = {name: scheduler_test_curve(level, TRAIN_STEPS) for name, level in LEVELS.items()}
    final_q = {name: level / 100 for name, level in LEVELS.items()}
    summary = summarize_early_stop(
        planned_steps={name: TRAIN_STEPS for name in LEVELS},
        stopped_at_step={name: check.check_step for name, check in stopped.items()},
        check_rankme={name: curve[check_step] for name, curve in curves.items()},
        final_q={name: q for name, q in final_q.items() if name not in low},
    )
    expected_saved = len(low) * (TRAIN_STEPS - check_step) / (len(LEVELS) * TRAIN_STEPS)
    assert summary.steps_saved_fraction == pytest.approx(expected_saved)
    assert summary.best_finished == "a" and not summary.best_changed

    # The offline simulation on the full curves: same trials kept, same steps saved, best kept.
    simulated = simulate_rankme_early_stop(list(curves.values()), list(final_q.values()), list(curves))
    at_check = simulated[simulated["step"] == check_step].iloc[0]
    assert at_check["trials_kept"] == len(LEVELS) - len(low)
    assert at_check["steps_saved_fraction"] == pytest.approx(summary.steps_saved_fraction)
    assert bool(at_check["best_kept"])


def test_summary_flags_a_best_the_offline_rule_would_have_kept_but_the_live_run_stopped():
    # "x" is top by RankMe (the offline rule keeps it) but was stopped live; the live pick is "y".
    summary = summarize_early_stop(
        planned_steps={"x": 100, "y": 100, "z": 100},
        stopped_at_step={"x": 25},
        check_rankme={"x": 30.0, "y": 20.0, "z": 10.0},
        final_q={"y": 0.5, "z": 0.6},
    )
    assert summary.steps_saved_fraction == pytest.approx(75 / 300)
    assert summary.best_finished == "z"
    assert summary.best_simulated == "y" and summary.best_changed


def test_cli_keep_fraction_outside_zero_one_exits_2_naming_the_flag(capsys, tracking_uri):
    argv = ["--grid", "mask_ratio", "--rankme-early-stop", "--keep-fraction", "1.5", "--tracking-uri", tracking_uri]
    assert main(argv) == 2
    assert "--keep-fraction" in capsys.readouterr().err


def test_reports_between_rankme_steps_do_not_count_as_rankme_points():
    # Pretraining repeats its latest RankMe in every report; only RankMe steps (every 10 of 40) count.
    scheduler = RankMeEarlyStopScheduler(min_samples=1)
    trial = Trial("curve_trainable", config={"trial": {"name": "a", "train_steps": 40}}, stub=True)
    for step in (0, 5, 10, 15, 20):
        scheduler.on_trial_result(None, trial, {"step": step, "rankme": float(step)})
    assert scheduler.rankme_histories["a"] == {0: 0.0, 10: 10.0, 20: 20.0}
    assert scheduler.checks["a"].check_step == 10
