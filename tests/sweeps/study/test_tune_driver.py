"""The study driver on real Ray Tune and MLflow, with a closed-form trial runner."""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from pipeline.tracking import runs as tracking
from sweeps.record.keys import STATUS_TAG, STUDY_EXPERIMENT, TASK_SET_TAG
from sweeps.record.rankme_pool import read_rankme_pool
from sweeps.study.driver import StudyConfig, StudyOutcome, run_study
from tests.conftest import REPO_ROOT

ENV = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}

SYNTHETIC_RUNNER = "tests.support.synthetic_trials:run_synthetic_trial"


def _study(tmp_path, **changes):
    settings = {
        "grid": "mask_ratio", "study_name": "masks", "tracking_uri": f"sqlite:///{tmp_path / 'mlflow.db'}",
        "storage_path": str(tmp_path / "ray"), "runner": SYNTHETIC_RUNNER, "prepare_shards": False, "n_bootstrap": 20,
    }  # fmt: skip
    return run_study(StudyConfig(**{**settings, **changes}))


# Each study on Ray Tune costs about 40 s of start-up on 2 cores, so one study is checked for several
# things: what a crash leaves and what resume reruns, the progress lines of a study and of a quiet one.
@pytest.mark.ray
def test_crash_is_recorded_and_printed_then_a_quiet_resume_runs_only_the_unfinished_trial(ray_local, tmp_path, capfd):
    (tmp_path / "ray").mkdir()
    (tmp_path / "ray" / "crash-mask0.70").touch()
    (tmp_path / "ray" / "die-once-mask0.60").touch()  # its process is lost, as with its node: Tune reruns it
    (tmp_path / "ray" / "hold-seconds").write_text("0")  # record intervals, no wait
    first = _study(tmp_path, max_concurrent=1)
    _assert_one_line_per_trial_event(
        [line for line in capfd.readouterr().err.splitlines() if line.startswith("[study ")]
    )
    # One at a time on ray_local's 2 CPUs: each trial trains and evaluates on both cores.
    assert _overlapping_pairs(_intervals(tmp_path / "ray")) == 0
    assert {workers for *_, workers in _intervals(tmp_path / "ray")} == {2}
    assert first.trials_failed == ["mask0.70"]  # raised: not rerun by Tune (it ran once, below)
    assert sorted((tmp_path / "ray" / "executions.txt").read_text().split()) == sorted(
        ["mask0.50", "mask0.60", "mask0.60", "mask0.70", "mask0.80", "mask0.90"]
    )  # the lost one ran again and finished
    assert "Q(R)" in first.fits.skipped  # four points left: too few to fit, and the report says so
    assert "need at least 5 points" in first.fits.skipped["Q(R)"]

    with pytest.raises(ValueError, match="pass --resume"):
        _study(tmp_path)

    (tmp_path / "ray" / "crash-mask0.70").unlink()
    second = _study(tmp_path, resume=True, quiet=True)
    assert not [line for line in capfd.readouterr().err.splitlines() if line.startswith("[study ")]
    assert second.trials_run == ["mask0.70"] and len(second.trials_skipped) == 4
    executions = (tmp_path / "ray" / "executions.txt").read_text().split()
    assert sorted(executions) == sorted(
        ["mask0.50", "mask0.60", "mask0.60", "mask0.70", "mask0.80", "mask0.90", "mask0.70"]
    )

    children = tracking.list_child_runs(f"sqlite:///{tmp_path / 'mlflow.db'}", second.parent_run_id)
    assert len(children) == 5  # the crashed trial's run was reused, not duplicated
    assert all(child["tags"][STATUS_TAG] == "ok" for child in children)
    assert second.fits.fits["Q(R)"].params["alpha"] == pytest.approx(0.8, abs=0.01)
    assert "| Q(R) |" in second.report_markdown


def _intervals(storage) -> list[tuple[str, float, float, int]]:
    rows = [line.split() for line in (storage / "intervals.txt").read_text().splitlines()]
    return [(name, float(start), float(end), int(workers)) for name, start, end, workers in rows]


def _most_at_once(intervals) -> int:
    return max(sum(1 for _, start, end, _ in intervals if start <= t < end) for _, t, _, _ in intervals)


def _overlapping_pairs(intervals) -> int:
    return sum(1 for i, a in enumerate(intervals) for b in intervals[i + 1 :] if a[1] < b[2] and b[1] < a[2])


@dataclass(frozen=True)
class ConcurrentStudy:
    outcome: StudyOutcome
    storage: Path
    uri: str
    dead_owners_run_id: str  # the study run a killed process left RUNNING before this study started
    listed: list[str]  # run ids whose children were listed, in order
    stderr: str


@pytest.fixture(scope="module")
def concurrent_study(ray_local, tmp_path_factory) -> ConcurrentStudy:
    """One study shared by the tests below (each Tune study costs ~45 s on 2 cores): its run left
    RUNNING by a process that is gone, then 5 trials of 4 s, two at a time (the default on 2 CPUs:
    one per core), child listings counted."""
    tmp_path = tmp_path_factory.mktemp("concurrent_study")
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    code = (
        f"from pipeline.tracking import runs as tracking; tracking.start_or_resume_run(tracking_uri={uri!r}, "
        f"experiment_name={STUDY_EXPERIMENT!r}, run_name='masks')"
    )
    subprocess.run([sys.executable, "-c", code], env=ENV, cwd=REPO_ROOT, check=True)  # exits, run left RUNNING
    dead_owners_run_id = tracking.find_run_id(uri, STUDY_EXPERIMENT, "masks")
    (tmp_path / "ray").mkdir()
    # 4 s: under a loaded machine, trial starts came more than 2 s apart and no two trials overlapped.
    (tmp_path / "ray" / "hold-seconds").write_text("4")
    listed, real = [], tracking.list_child_runs
    with pytest.MonkeyPatch.context() as patch, contextlib.redirect_stderr(io.StringIO()) as stderr:
        patch.setattr(tracking, "list_child_runs", lambda uri, run_id: listed.append(run_id) or real(uri, run_id))
        outcome = _study(tmp_path)  # no --resume: the dead process's run is taken over
    return ConcurrentStudy(outcome=outcome, storage=tmp_path / "ray", uri=uri, dead_owners_run_id=dead_owners_run_id,
                           listed=listed, stderr=stderr.getvalue())  # fmt: skip


@pytest.mark.ray
def test_trials_run_concurrently_up_to_the_limit_and_evaluate_on_their_share_of_the_cores(concurrent_study):
    # By default one trial per core: two at once on ray_local's 2 CPUs, each on 1 thread.
    assert concurrent_study.outcome.trials_failed == []
    intervals = _intervals(concurrent_study.storage)
    assert len(intervals) == 5
    assert _overlapping_pairs(intervals) > 0 and _most_at_once(intervals) <= 2
    assert {workers for *_, workers in intervals} == {1}
    # Where the time went (printed after the closing lines): no defaults or baselines in this study.
    phases = concurrent_study.outcome.phase_seconds
    assert list(phases) == ["start-up", "trials", "fits"] and all(seconds > 0 for seconds in phases.values())
    assert phases["trials"] > 4.0  # five trials of 4 s, two at a time


@pytest.mark.ray
def test_a_study_lists_its_children_to_resume_and_to_close_and_records_its_pool_once(concurrent_study):
    outcome, uri = concurrent_study.outcome, concurrent_study.uri
    # Once before the trials (the ledger of what an earlier attempt finished), once for the whole analysis.
    assert concurrent_study.listed == [outcome.parent_run_id] * 2
    pool = read_rankme_pool(uri, outcome.parent_run_id)
    assert pool is not None and pool.fingerprint == "synthetic0000000"  # five trials reported it; one artifact
    assert tracking.list_artifacts(uri, outcome.parent_run_id).count("rankme_pool.json") == 1
    # The task set Q is over, recorded with the study (the CPU profile declares none).
    assert tracking.read_run(uri, outcome.parent_run_id)["tags"][TASK_SET_TAG] == "the profile declares no task set"


@pytest.mark.ray
def test_a_study_left_running_by_a_dead_process_is_taken_over(concurrent_study):
    outcome = concurrent_study.outcome
    assert "taking it over" in concurrent_study.stderr
    assert outcome.parent_run_id == concurrent_study.dead_owners_run_id  # the same run, not a second one
    assert not outcome.trials_failed and len(outcome.trials_run) == 5
    assert tracking.read_run(concurrent_study.uri, outcome.parent_run_id)["status"] == "FINISHED"


def _assert_one_line_per_trial_event(lines: list[str]) -> None:
    """Five trials, mask0.70 crashing: a started line each, a finished line with R, Q and an ETA for the others."""
    assert sum("started: mask" in line for line in lines) == 5
    # mask0.60's process was lost once: said, and run again (mask0.70 raised: not said to be lost)
    assert [line.split("] ", 1)[1] for line in lines if "again" in line and "mask0.60" in line] == [
        "trial mask0.60 lost its process (a lost node?); running it again, resumed from its last checkpoint",
        "trial mask0.60 running again",
    ]
    assert not any("mask0.70 lost" in line for line in lines)
    assert any("trial 1/5 started: mask0.50" in line for line in lines)
    finished = [line for line in lines if " finished in " in line]
    assert len(finished) == 4 and all("R " in line and "Q " in line for line in finished)
    assert "about " in finished[-1] and "left" in finished[-1]  # an ETA once a trial has finished
    assert sum("trial mask0.70 FAILED" in line for line in lines) == 1
    assert any("fitting the laws" in line for line in lines)
