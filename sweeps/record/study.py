"""A whole study read back once: its run's settings, its trials, their checkpoints, its external points.

Every consumer of a finished (or interrupted) study — the driver's closing analysis, the analysis
logged on the study run, `python -m sweeps.laws --study` and `python -m sweeps.external` — takes
one `StudyRecord` instead of listing the study's child runs again: `read_study` is the one place
that lists them (tracking.list_child_runs, one MLflow search plus one read per child).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any

import pandas as pd

from pipeline.evaluate.baselines import BASELINES
from pipeline.tracking import runs as tracking
from sweeps.record import keys
from sweeps.record.baseline import BaselineRecord, is_baseline
from sweeps.record.checkpoint_point import CheckpointPoint
from sweeps.record.external_point import ExternalPoint, external_points_table, is_external
from sweeps.record.trial import TrialRecord, trial_row

RunDict = dict[str, Any]


class StudyNotFoundError(ValueError):
    """No study run of that name in the studies' experiment."""


@dataclass(frozen=True, kw_only=True)
class StudySettings:
    """What the driver records on the study run when it opens it (params grid, profile, probe)."""

    name: str
    grid: str = ""
    profile: str = ""
    probe: str = ""  # the scene probe every trial's Q was scored with: Q compares only within one probe
    train_seeds: int = 1  # training seeds per configuration (--train-seeds)

    def params(self, *, n_trials: int) -> dict[str, Any]:
        return {keys.GRID_PARAM: self.grid, keys.PROFILE_PARAM: self.profile, keys.N_TRIALS_PARAM: n_trials,
                keys.PROBE_PARAM: self.probe, keys.TRAIN_SEEDS_PARAM: self.train_seeds}  # fmt: skip

    @classmethod
    def from_params(cls, name: str, params: dict[str, str]) -> StudySettings:
        return cls(name=name, grid=params.get(keys.GRID_PARAM, ""), profile=params.get(keys.PROFILE_PARAM, ""),
                   probe=params.get(keys.PROBE_PARAM, ""),
                   train_seeds=int(params.get(keys.TRAIN_SEEDS_PARAM, 1)))  # fmt: skip


@dataclass(frozen=True, kw_only=True)
class StudyRecord:
    run: tracking.TrackedRun  # the study run
    settings: StudySettings
    children: tuple[RunDict, ...]  # every child run, oldest first (tracking.read_run dictionaries)
    status: str = ""  # the study run's MLflow status: RUNNING, FINISHED, KILLED, FAILED
    planned_trials: int | None = None  # the trials its driver planned (param n_trials), when recorded

    @property
    def name(self) -> str:
        return self.settings.name

    @property
    def trial_runs(self) -> list[RunDict]:
        """The study's own trials, whatever their status: every child but the external points and baselines."""
        return [run for run in self.children if not is_external(run) and not is_baseline(run)]

    def baselines(self) -> list[BaselineRecord]:
        """The baselines measured for this study (sweeps.record.baseline), latest run per name, in the
        order they are measured (naive, initialisation, control), whatever their runs' start times."""
        latest = {}
        for run in self.children:  # oldest first: a later run of the same baseline replaces an earlier one
            if is_baseline(run):
                record = BaselineRecord.from_run(run)
                latest[record.name] = record
        order = {name: index for index, name in enumerate(BASELINES)}
        return sorted(latest.values(), key=lambda record: order.get(record.name, len(order)))

    @cached_property
    def trial_table(self) -> pd.DataFrame:
        """One row per trial run (sweeps.record.trial.trial_row); `converged` False where a run never said."""
        table = pd.DataFrame([trial_row(run) for run in self.trial_runs])
        if keys.CONVERGED_KEY in table.columns:
            table[keys.CONVERGED_KEY] = table[keys.CONVERGED_KEY].fillna(False).astype(bool)
        return table

    def trials(self) -> list[TrialRecord]:
        """The typed records of the trials that finished (status ok)."""
        return [
            TrialRecord.from_run(run) for run in self.trial_runs if run["tags"].get(keys.STATUS_TAG) == keys.STATUS_OK
        ]

    def checkpoint_points(self) -> dict[str, dict[int, CheckpointPoint]]:
        """trial -> step -> (R, Q) of each evaluated checkpoint, for the finished trials."""
        return {trial.trial: trial.checkpoint_points for trial in self.trials()}

    def external_points(self) -> list[ExternalPoint]:
        return [ExternalPoint.from_run(run) for run in self.children if is_external(run)]

    @cached_property
    def external_table(self) -> pd.DataFrame:
        return external_points_table(self.external_points())

    def incompleteness(self) -> str | None:
        """Why a refit of this study is not a fit of the whole study, in one sentence, or None: the
        study run did not finish (killed, failed, still running) or fewer trials finished than it
        planned. A refit fits what is there; the user must hear that it is not everything."""
        finished = len(self.finished_trials())
        short = self.planned_trials is not None and finished < self.planned_trials
        if self.status in ("", "FINISHED") and not short:
            return None
        state = "did not finish" if self.status in ("", "FINISHED") else f"is {self.status}"
        planned = f" of its {self.planned_trials} planned trials" if self.planned_trials is not None else " trials"
        return (
            f"study {self.name!r} {state}: {finished}{planned} finished, and the laws are fitted on those only; "
            f"`python -m sweeps.scaling --grid {self.settings.grid or 'GRID'} --study {self.name} --resume` runs the rest"
        )

    def finished_trials(self) -> set[str]:
        """Trials a resumed study does not run again (ok or stopped early)."""
        done = [run for run in self.trial_runs if run["tags"].get(keys.STATUS_TAG) in keys.DONE_STATUSES]
        return {run["params"].get(keys.TRIAL_PARAM) for run in done}


def find_study_run(tracking_uri: str, study_name: str) -> str:
    """The study run's id; StudyNotFoundError naming the study and the store when there is none."""
    run_id = tracking.find_run_id(tracking_uri, keys.STUDY_EXPERIMENT, study_name)
    if run_id is None:
        raise StudyNotFoundError(
            f"no study run named {study_name!r} in experiment {keys.STUDY_EXPERIMENT!r} at {tracking_uri}; "
            "check --study and --tracking-uri (the MLflow UI lists the study runs)"
        )
    return run_id


def read_study_settings(tracking_uri: str, run_id: str, study_name: str) -> StudySettings:
    """The study run's settings alone (one run read, no children)."""
    return StudySettings.from_params(study_name, tracking.read_run(tracking_uri, run_id)["params"])


def read_study(tracking_uri: str | None, study_name: str, *, run_id: str | None = None) -> StudyRecord:
    """The study `study_name` (or the run `run_id`), its children listed once. The commands that start
    here check the store first (`tracking.checked_store`)."""
    uri = tracking.resolve_tracking_uri(tracking_uri)
    run_id = run_id or find_study_run(uri, study_name)
    parent = tracking.read_run(uri, run_id)
    planned = parent["params"].get(keys.N_TRIALS_PARAM)
    return StudyRecord(
        run=tracking.attach_run(uri, run_id),
        settings=StudySettings.from_params(study_name, parent["params"]),
        children=tuple(tracking.list_child_runs(uri, run_id)),
        status=parent["status"],
        planned_trials=int(planned) if planned and planned.isdigit() else None,
    )
