"""An external point's tasks held to its study's: Q is a mean over tasks, so it compares only over the same ones.

A study's Q is the mean of the primary scores of the tasks its trials were scored on (the
`score/<task>` metrics of its finished trials). A module scored on another folder (one task of
seven, say) gets a Q that would sit on the study's Q(R) figure as if it were comparable. So
`python -m sweeps.external` refuses a task set that differs from the study's before the module is
scored, naming what is missing and what is extra, unless the user passes `--accept-task-set`
(as a study does against its profile's set: sweeps.study.preflight); the accepted difference is
then recorded on the point's run (`audioscale.task_set`) and said on the terminal.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from pipeline.task_format.reader import list_task_dirs, read_task_info
from sweeps.record.study import StudyRecord

ACCEPT_FLAG = "--accept-task-set"


@dataclass(frozen=True, kw_only=True)
class ExternalTaskSet:
    """The tasks the point is scored on against the study's ones."""

    study: tuple[str, ...]  # the tasks the study's trials were scored on; () when none records them
    present: tuple[str, ...]  # the tasks the point is scored on

    @property
    def missing(self) -> tuple[str, ...]:
        return tuple(name for name in self.study if name not in self.present)

    @property
    def extra(self) -> tuple[str, ...]:
        return tuple(name for name in self.present if name not in self.study)

    @property
    def known(self) -> bool:
        return bool(self.study)

    @property
    def matches(self) -> bool:
        return not self.known or not (self.missing or self.extra)

    def difference(self) -> str:
        parts = []
        if self.missing:
            parts.append(
                f"missing {len(self.missing)} of the study's {len(self.study)} tasks: {', '.join(self.missing)}"
            )
        if self.extra:
            parts.append(f"{len(self.extra)} not in the study's: {', '.join(self.extra)}")
        return "; ".join(parts)

    def describe(self) -> str:
        """One line for the point's run."""
        if not self.known:
            return f"not compared: the study's trials record no task scores; scored on {', '.join(self.present)}"
        if self.matches:
            return f"the study's {len(self.study)} tasks: {', '.join(self.study)}"
        return f"accepted with {ACCEPT_FLAG}: {self.difference()}"


def task_names_in(tasks_dir: Path, names: list[str] | None = None) -> list[str]:
    """The names the tasks under `tasks_dir` are scored under (task_metadata.json's task_name)."""
    return [read_task_info(directory).name for directory in list_task_dirs(tasks_dir, names)]


def study_task_names(study: StudyRecord) -> tuple[str, ...]:
    """The tasks the study's finished trials were scored on (sorted; their union)."""
    return tuple(sorted({task for trial in study.trials() for task in trial.task_scores}))


def check_external_task_set(
    study_name: str, study_tasks: Iterable[str], present: Iterable[str], *, accept_difference: bool, where: str
) -> ExternalTaskSet:
    """The comparison; a ValueError naming `where` and the difference unless it matches or is accepted."""
    check = ExternalTaskSet(study=tuple(sorted(study_tasks)), present=tuple(sorted(present)))
    if not check.matches and not accept_difference:
        raise ValueError(
            f"{where} holds {len(check.present)} task(s) ({', '.join(check.present)}), but study {study_name}'s Q "
            f"is the mean of {len(check.study)} ({', '.join(check.study)}): {check.difference()}; a Q over other "
            f"tasks does not compare with the trials'. Point --tasks-dir at the study's tasks, or pass {ACCEPT_FLAG} "
            "to score on these (the point's run records the difference)"
        )
    return check
