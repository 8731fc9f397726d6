"""The RankMe early-stop rule: its arithmetic, its replay on finished trials, and the live scheduler
on real Ray Tune - one rule (sweeps.protocol.early_stop_rule) for all three."""

from __future__ import annotations

import numpy as np
import pytest
from ray import tune
from ray.tune.experiment import Trial
from ray.tune.schedulers import TrialScheduler

from sweeps.protocol.early_stop_rule import (
    DEFAULT_CHECK_FRACTION,
    DEFAULT_KEEP_FRACTION,
    check_step_for,
    decision_step_for,
    n_trials_kept,
    planned_steps_saved_fraction,
    replay_decision_point,
    should_stop,
)
from sweeps.report.early_prediction import simulate_rankme_early_stop
from sweeps.scaling import main
from sweeps.study.early_stop import RankMeEarlyStopScheduler, summarize_early_stop
from sweeps.study.grids import expand_grids
from tests.support.synthetic_curves import curve_trainable, scheduler_test_curve

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


def test_rule_keeps_the_first_trials_and_stops_those_outside_the_top_fraction():
    assert not should_stop(1.0, [9.0, 1.0], keep_fraction=0.5, min_samples=3)  # too few seen yet
    assert should_stop(1.0, [9.0, 5.0, 1.0], keep_fraction=0.5, min_samples=3)  # top ceil(1.5) = 2 kept
    assert not should_stop(5.0, [9.0, 5.0, 1.0], keep_fraction=0.5, min_samples=3)  # second of three: kept
    # keep_fraction 0.25: only the top one of four continues.
    assert should_stop(6.0, [1.0, 5.0, 6.0, 9.0], keep_fraction=0.25, min_samples=1)
    # A tie with the last kept value is kept: stopping is the costly mistake.
    assert not should_stop(5.0, [9.0, 5.0, 5.0, 1.0, 0.5], keep_fraction=0.4)
    assert [n_trials_kept(n, 0.4) for n in (1, 2, 3, 4, 5, 10, 14)] == [1, 1, 2, 2, 2, 4, 6]


@pytest.mark.ray
def test_live_scheduler_stops_exactly_the_low_rankme_trials_and_matches_the_simulation(ray_local, tmp_path):
    scheduler = RankMeEarlyStopScheduler(keep_fraction=0.5, min_samples=2)
    results = _run_tune(tmp_path, scheduler)
    assert all(result.error is None for result in results)  # stopped, not failed

    check_step = decision_step_for(TRAIN_STEPS, check_fraction=0.25)
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
        keep_fraction=scheduler.keep_fraction,
    )
    expected_saved = len(low) * (TRAIN_STEPS - check_step) / (len(LEVELS) * TRAIN_STEPS)
    assert summary.steps_saved_fraction == pytest.approx(expected_saved)
    assert summary.best_finished == "a" and not summary.best_changed

    # The offline simulation on the full curves: same trials kept, same steps saved, best kept.
    simulated = simulate_rankme_early_stop(
        list(curves.values()), list(final_q.values()), list(curves), keep_fraction=scheduler.keep_fraction
    )
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
    # Pretraining repeats its latest RankMe in every report; only RankMe steps count: Table III's
    # fractions of 40 steps, 3, 6, 11, 17 and 40.
    scheduler = RankMeEarlyStopScheduler(min_samples=1)
    trial = Trial("curve_trainable", config={"trial": {"name": "a", "train_steps": 40}}, stub=True)
    for step in (3, 5, 6, 10, 11, 15):
        scheduler.on_trial_result(None, trial, {"step": step, "rankme": float(step)})
    assert scheduler.rankme_histories["a"] == {3: 3.0, 6: 6.0, 11: 11.0}
    assert scheduler.checks["a"].check_step == 11


@pytest.mark.parametrize("flag,value", [("--keep-fraction", "0"), ("--check-fraction", "1.0")])
def test_cli_rule_settings_out_of_range_exit_2_naming_the_flag_even_without_the_scheduler(
    capsys, tracking_uri, flag, value
):
    assert main(["--grid", "mask_ratio", flag, value, "--tracking-uri", tracking_uri]) == 2
    assert flag in capsys.readouterr().err


def test_default_rule_saves_at_least_40_percent_of_the_default_grid():
    trials = expand_grids("mask_ratio", profile="cpu_default")
    steps = {t.train_steps for t in trials}
    assert len(trials) == 5 and steps == {300}
    assert n_trials_kept(5, DEFAULT_KEEP_FRACTION) == 2  # 0.4 x 5 = 2 exactly, not rounded up to 3
    # RankMe at Table III's fractions of 300 steps (21, 43, 86, 129, 300): the first at or after 75 is 86.
    assert decision_step_for(300, check_fraction=DEFAULT_CHECK_FRACTION) == 86
    saved = planned_steps_saved_fraction(len(trials), 300)
    assert saved == pytest.approx(3 * 214 / 1500) and saved >= 0.40
    # The same rule on a 100-step horizon (Table III's steps 7, 14, 29, 43, 100): decides at 29.
    assert decision_step_for(100, check_fraction=DEFAULT_CHECK_FRACTION) == 29
    # Why the default moved: keeping half keeps 3 of 5 and saves 2 x 71 / 500 = 28%.
    assert planned_steps_saved_fraction(5, 100, keep_fraction=0.5) == pytest.approx(2 * 71 / 500)


def _five_curves(levels: dict[str, float]) -> dict[str, dict[int, float]]:
    return {name: scheduler_test_curve(level, 100) for name, level in levels.items()}


def test_replay_at_the_decision_step_keeps_the_top_two_and_says_whether_the_best_survived():
    levels = {"m50": 60.0, "m60": 20.0, "m70": 50.0, "m80": 10.0, "m90": 40.0}
    curves = _five_curves(levels)
    planned = {name: 100 for name in levels}
    replay = replay_decision_point(curves, {n: level / 100 for n, level in levels.items()}, planned)
    assert replay.kept == ["m50", "m70"] and replay.stopped == ["m60", "m80", "m90"]
    assert set(replay.decision_step.values()) == {29}  # Table III's 200/700 of 100 steps
    assert replay.steps_saved_fraction == pytest.approx(3 * 71 / 500)
    assert replay.best == "m50" and replay.best_kept
    assert "Steps saved: 43% of the planned steps, which meets the 40% target." in replay.markdown()
    assert "is among the kept trials" in replay.markdown()

    # The best final Q belongs to a trial with low early RankMe: the replay says it plainly.
    upset = {**{n: level / 100 for n, level in levels.items()}, "m80": 0.9}
    lost = replay_decision_point(curves, upset, planned)
    assert not lost.best_kept and lost.best_kept_trial == "m50"
    assert "(m80, Q 0.9000) was NOT kept: this rule would have stopped it at step 29" in lost.markdown()
    assert "changed the study's pick to m50 (Q 0.6000)" in lost.markdown()


def test_live_scheduler_and_replay_apply_the_same_rule():
    # Trials arrive highest RankMe first, so the live rule sees the range as the replay does; the
    # default min_samples (3) keeps the first two (with one, m70 would be ranked among two and stopped).
    levels = {"m50": 60.0, "m70": 50.0, "m90": 40.0, "m60": 20.0, "m80": 10.0}
    scheduler = RankMeEarlyStopScheduler()
    for name, curve in _five_curves(levels).items():
        trial = Trial("curve_trainable", config={"trial": {"name": name, "train_steps": 100}}, stub=True)
        for step, rankme in curve.items():
            if scheduler.on_trial_result(None, trial, {"step": step, "rankme": rankme}) == TrialScheduler.STOP:
                break
    replay = replay_decision_point(_five_curves(levels), {n: 0.5 for n in levels}, {n: 100 for n in levels})
    assert sorted(scheduler.stopped_trials()) == replay.stopped == ["m60", "m80", "m90"]
