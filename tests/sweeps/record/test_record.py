"""The study's record: each typed record written to a real MLflow store reads back equal, the pool is
written once, and a study's children are listed once per read."""

from __future__ import annotations

import math

import mlflow
import pytest

from pipeline.tracking import runs as tracking
from sweeps.record.checkpoint_point import Q_DECIMALS, CheckpointPoint, read_checkpoint_points
from sweeps.record.external_point import ExternalPoint
from sweeps.record.keys import RANKME_POOL_ARTIFACT, STUDY_EXPERIMENT, child_run_name
from sweeps.record.rankme_pool import RankMePoolRecord, read_rankme_pool
from sweeps.record.study import StudyNotFoundError, read_study
from sweeps.record.trial import TrialRecord, mark_trial_failed
from sweeps.study.law_analysis import log_study_analysis, refit_study

STUDY = "record-study"
POOL = RankMePoolRecord(shards_dir="/data/shards/mel128", crop_frames=1024, n=600, fingerprint="0123abcd")


def _run(uri: str, name: str, parent: tracking.TrackedRun | None = None) -> tracking.TrackedRun:
    return tracking.start_or_resume_run(tracking_uri=uri, experiment_name=STUDY_EXPERIMENT, run_name=name,
                                        parent_run_id=parent.run_id if parent else None)  # fmt: skip


def _trial(name: str, ratio: float, *, pool: RankMePoolRecord | None = POOL) -> TrialRecord:
    """A trial with three evaluated checkpoints (at RankMe steps, as Table III's are), an interval at
    each, two task scores, and a coordinate on a numeric and on a labelled grid."""
    q = 0.5 + 0.1 * ratio

    def at(offset: float) -> float:  # Q-scale values as a record logs them (CheckpointPoint.Q_DECIMALS)
        return round(q + offset, Q_DECIMALS)

    points = {
        0: CheckpointPoint(rankme=5.0, q=0.3, task_scores={"tones": 0.3, "mixtures": 0.3}, q_ci=(0.25, 0.35)),
        50: CheckpointPoint(rankme=20.0 * ratio, q=at(-0.05), task_scores={"tones": at(-0.05), "mixtures": at(-0.05)}),
        100: CheckpointPoint(rankme=30.0 * ratio, q=at(0), task_scores={"tones": at(0.01), "mixtures": at(-0.01)},
                             q_ci=(at(-0.02), at(0.02))),
    }  # fmt: skip
    return TrialRecord(
        trial=name, model_name="mae-debug", arch="mae", n_params=144_672, hours=3.0, flops=1.5e12, mask_ratio=ratio,
        rankme=30.0 * ratio, rankme_by_step={0: 5.0, 50: 20.0 * ratio, 100: 30.0 * ratio}, q=at(0),
        task_scores={"tones": at(0.01), "mixtures": at(-0.01)}, q_ci_low=at(-0.02), q_ci_high=at(0.02),
        q_interval_over="probe seeds", configuration=name, rankme_n=600, rankme_pool=POOL.fingerprint,
        rankme_capped=True, task_rankme=12.5, probe_seeds=3, coordinates={"mask_ratio": ratio, "size": "w32d2"},
        checkpoint_points=points, scale="base", pool=pool,
        reading={"readout_stats": "calibrated", "readout_calibration_pool": "9f00aa11", "readout_calibration_crops": 1024,
                 "input_normalisation": "dataset", "input_stats_from": "s3://bucket/shards", "input_stats_sha256": "ab12"},
    )  # fmt: skip


def _write_study(uri: str, ratios=(0.5, 0.6, 0.7, 0.8, 0.9)) -> tracking.TrackedRun:
    parent = _run(uri, STUDY)
    parent.log_params({"grid": "mask_ratio", "profile": "cpu_default", "probe": "linear"})
    for ratio in ratios:
        child = _run(uri, child_run_name(STUDY, f"mask{ratio}"), parent)
        _trial(f"mask{ratio}", ratio).write(child, study_run=parent)
        child.finish()
    failed = _run(uri, child_run_name(STUDY, "broken"), parent)
    mark_trial_failed(failed, "RuntimeError: boom")
    return parent


def test_a_trial_record_reads_back_equal(tracking_uri):
    record = _trial("mask0.70", 0.7)
    run = _run(tracking_uri, "one-trial")
    record.write(run)
    back = TrialRecord.from_run(tracking.read_run(tracking_uri, run.run_id))
    assert back == record
    assert back.coordinates == {"mask_ratio": 0.7, "size": "w32d2"}  # a number stays a number, a label text
    assert all(map(math.isnan, back.checkpoint_points[50].q_ci))  # no interval at that checkpoint


def test_a_point_is_logged_with_the_decimals_its_spread_supports(tracking_uri):
    point = CheckpointPoint(
        rankme=43.123456, q=0.58034613, task_scores={"pitch": 0.7571234}, q_ci=(0.5612345, 0.5994567)
    )
    run = _run(tracking_uri, "rounded")
    point.write(run, 100)
    metrics = {key: history[-1][1] for key, history in tracking.read_run(tracking_uri, run.run_id)["metrics"].items()}
    # What the UI showed cut as 0.58034613... it now shows rounded; Q's interval is about +-0.018.
    assert metrics == {"q": 0.5803, "rankme": 43.12, "score/pitch": 0.7571, "q_ci_low": 0.5612, "q_ci_high": 0.5995}


def test_a_trial_logs_one_rankme_and_one_q_per_evaluated_step(tracking_uri):
    """MLflow's own chart of Q against R pairs the i-th values: a second R at the last step shifted
    every pair by one (a trial had 9 R values against 8 Q)."""
    record = _trial("mask0.70", 0.7)
    run = _run(tracking_uri, "one-trial")
    record.write(run)
    history = tracking.read_run(tracking_uri, run.run_id)["metrics"]
    assert [step for step, _ in history["rankme"]] == [0, 50, 100]
    assert [step for step, _ in history["q"]] == [0, 50, 100]
    assert dict(history["rankme"])[100] == pytest.approx(21.0)


def test_checkpoint_points_read_back_equal_at_their_steps(tracking_uri):
    points = {7: CheckpointPoint(rankme=11.0, q=0.4, task_scores={"tones": 0.45}, q_ci=(0.38, 0.42)),
              14: CheckpointPoint(rankme=12.0, q=0.5)}  # fmt: skip
    run = _run(tracking_uri, "points")
    for step, point in points.items():
        point.write(run, step)
    back = read_checkpoint_points(tracking.read_run(tracking_uri, run.run_id)["metrics"])
    assert back.keys() == points.keys() and back[7] == points[7]
    assert (back[14].rankme, back[14].q, back[14].task_scores) == (12.0, 0.5, {}) and math.isnan(back[14].q_ci[0])


def test_an_external_point_reads_back_equal_and_stays_out_of_the_trials(tracking_uri):
    parent = _run(tracking_uri, STUDY)
    point = ExternalPoint(label="toy", hear_module="tests.support.toy_hear_module", model_file_sha256="ab" * 32,
                          rankme=17.5, q=0.61, rankme_n=600, rankme_pool=POOL.fingerprint, rankme_capped=True,
                          task_scores={"tones": 0.7, "mixtures": 0.52})  # fmt: skip
    run = _run(tracking_uri, point.run_name(STUDY), parent)
    point.write(run, extra_params={"seeds": 1}, extra_metrics={"rankme_k": 64.0})
    run.finish()
    study = read_study(tracking_uri, STUDY)
    assert study.external_points() == [point] and study.external_points()[0].run_id == run.run_id
    assert study.trial_runs == [] and study.trial_table.empty
    assert study.children[0]["run_name"] == "external-toy@record-study"


def test_the_pool_is_written_once_and_reads_back_equal(tracking_uri):
    study_run = _run(tracking_uri, STUDY)
    assert read_rankme_pool(tracking_uri, study_run.run_id) is None  # a study from before the record
    assert POOL.write_once(study_run)
    other = RankMePoolRecord(shards_dir="/elsewhere", crop_frames=512, n=10, fingerprint="ffff")
    assert not other.write_once(study_run)  # the first trial's pool stays the study's
    assert read_rankme_pool(tracking_uri, study_run.run_id) == POOL
    assert tracking.list_artifacts(tracking_uri, study_run.run_id).count(RANKME_POOL_ARTIFACT) == 1


def test_a_study_reads_back_settings_trials_points_and_its_pool(tracking_uri):
    parent = _write_study(tracking_uri, ratios=(0.5, 0.9))
    study = read_study(tracking_uri, STUDY)
    assert (study.settings.grid, study.settings.probe, study.settings.profile) == (
        "mask_ratio",
        "linear",
        "cpu_default",
    )
    assert study.trials() == [_trial("mask0.5", 0.5), _trial("mask0.9", 0.9)]
    assert set(study.checkpoint_points()["mask0.9"]) == {0, 50, 100}
    assert sorted(study.trial_table["status"]) == ["failed", "ok", "ok"]
    assert study.finished_trials() == {"mask0.5", "mask0.9"}
    assert read_rankme_pool(tracking_uri, parent.run_id) == POOL  # two trials reported it, written once
    with pytest.raises(StudyNotFoundError, match="no study run named 'nope'"):
        read_study(tracking_uri, "nope")


@pytest.fixture
def counted_child_listing(monkeypatch):
    """Every call to tracking.list_child_runs, counted (the real one runs: a real store is read)."""
    calls = []
    real = tracking.list_child_runs

    def counting(tracking_uri, parent_run_id):
        calls.append(parent_run_id)
        return real(tracking_uri, parent_run_id)

    monkeypatch.setattr(tracking, "list_child_runs", counting)
    return calls


def test_a_refit_lists_the_study_children_once(tracking_uri, counted_child_listing):
    parent = _write_study(tracking_uri)
    markdown = refit_study(STUDY, tracking_uri=tracking_uri, n_bootstrap=0)
    assert "| Q(R) |" in markdown
    assert counted_child_listing == [parent.run_id]


def test_the_analysis_takes_the_record_and_lists_nothing_again(tracking_uri, counted_child_listing):
    _write_study(tracking_uri)
    study = read_study(tracking_uri, STUDY)
    assert len(counted_child_listing) == 1
    log_study_analysis(study, n_bootstrap=0)  # trial table, external points and settings: all from the record
    assert len(counted_child_listing) == 1


def test_a_baseline_has_metric_names_of_its_own_and_the_duration_of_its_measurement(tracking_uri):
    import time

    from sweeps.record.baseline import BaselineRecord

    record = BaselineRecord(name="control", q=0.6171, description="positive control", task_scores={"pitch": 0.7},
                            seconds=213.0)  # fmt: skip
    run = tracking.start_or_resume_run(tracking_uri=tracking_uri, experiment_name="baselines", run_name="control",
                                       start_time_ms=int(1000 * (time.time() - 213.0)))  # fmt: skip
    record.write(run)
    run.finish_after(213.0)
    written = tracking.read_run(tracking_uri, run.run_id)
    # Not a trial's `q`: the UI drew it at step 0 of the trials' charts and in their q column.
    assert {"baseline.q", "baseline.score/pitch", "seconds"} == set(written["metrics"])
    assert BaselineRecord.from_run(written) == record
    info = mlflow.MlflowClient(tracking_uri).get_run(run.run_id).info
    assert (info.end_time - info.start_time) == 213_000  # the UI's Duration: the measurement's, not 30 ms
    # Rounded as a trial's points are: the UI printed the control's Q as 0.610974031919.
    unrounded = tracking.start_or_resume_run(tracking_uri=tracking_uri, experiment_name="baselines", run_name="raw")
    BaselineRecord(name="control", q=0.610974031919, task_scores={"pitch": 0.70123456}, seconds=1.0).write(unrounded)
    logged = tracking.read_run(tracking_uri, unrounded.run_id)["metrics"]
    assert (logged["baseline.q"][-1][1], logged["baseline.score/pitch"][-1][1]) == (0.611, 0.7012)
    # A store written before keeps `q` and `score/<task>`: still read.
    old = tracking.start_or_resume_run(tracking_uri=tracking_uri, experiment_name="baselines", run_name="old")
    old.set_tags({"audioscale.baseline": "control"})
    old.log_params({"baseline": "control", "description": "positive control"})
    old.log_metrics({"q": 0.6171, "seconds": 213.0, "score/pitch": 0.7}, step=0)
    assert BaselineRecord.from_run(tracking.read_run(tracking_uri, old.run_id)) == record


def test_a_studys_baselines_read_back_in_the_order_they_are_measured(tracking_uri):
    import time

    from sweeps.record.baseline import BaselineRecord

    parent = _write_study(tracking_uri, ratios=(0.5,))
    # A baseline's run starts when its measurement did: the control's minutes of training put it first.
    for name, seconds in (("naive", 24.0), ("initialisation", 42.0), ("control", 293.0)):
        record = BaselineRecord(name=name, q=0.5, seconds=seconds)
        run = tracking.start_or_resume_run(tracking_uri=tracking_uri, experiment_name=STUDY_EXPERIMENT,
                                           run_name=record.run_name(STUDY), parent_run_id=parent.run_id,
                                           start_time_ms=int(1000 * (time.time() - seconds)))  # fmt: skip
        record.write(run)
        run.finish_after(seconds)
    # The summary lists them in this order, as the README's closing lines do.
    assert [b.name for b in read_study(tracking_uri, STUDY).baselines()] == ["naive", "initialisation", "control"]
