"""Live RankMe early stopping: a Tune scheduler that stops trials whose early RankMe is low.

The rule is `sweeps.protocol.early_stop_rule` (the one the report replays on finished trials), applied
online: at its decision step (by default the first RankMe step at or after 25% of the trial's
planned steps) a trial is stopped when its RankMe is not among the top ceil(keep_fraction x n) of
the n RankMe values seen at that step so far (its own included). The first `min_samples - 1`
trials to reach a step always continue: a rank among one or two values says nothing. Online and
offline agree when the trials reaching the step first span the range of RankMe (e.g. a
high-RankMe trial first); a low-RankMe trial among the first `min_samples - 1` is kept online but
stopped offline.

Results without `step` and `rankme` (e.g. the trial's final Q report) pass through untouched, and
so do reports between RankMe steps (the train loop repeats its latest RankMe in each report).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from ray.tune.experiment import Trial
from ray.tune.schedulers import FIFOScheduler, TrialScheduler

from sweeps.protocol.early_stop_rule import (
    DEFAULT_CHECK_FRACTION,
    DEFAULT_KEEP_FRACTION,
    DEFAULT_MIN_SAMPLES,
    check_step_among,
    check_step_for,
    rankme_at_decision,
    rankme_steps_for,
    should_stop,
    validate_rule,
)
from sweeps.record import keys

__all__ = [
    "DEFAULT_CHECK_FRACTION",
    "DEFAULT_KEEP_FRACTION",
    "DEFAULT_MIN_SAMPLES",
    "EarlyStopSummary",
    "RankMeEarlyStopScheduler",
    "TrialCheck",
    "check_step_among",
    "check_step_for",
    "rankme_steps_for",
    "should_stop",
    "summarize_early_stop",
    "summarize_study_table",
]


def _study_trial_name(config: dict[str, Any]) -> str:
    return config["trial"]["name"]


def _study_trial_steps(config: dict[str, Any]) -> int:
    return int(config["trial"]["train_steps"])


@dataclass(frozen=True, kw_only=True)
class TrialCheck:
    """What the scheduler decided for one trial at its check step."""

    trial: str
    planned_steps: int
    check_step: int  # the step the decision was taken at (the trial's first report at/after it)
    rankme: float
    stopped: bool


class RankMeEarlyStopScheduler(FIFOScheduler):
    """Stop a trial at its check step when its RankMe is not in the top `keep_fraction` so far.

    `trial_name` and `planned_steps` read a trial's name and planned training steps from its Tune
    config (defaults: the study driver's `config["trial"]["name"]` / `["train_steps"]`). After the
    run, `checks` holds one `TrialCheck` per trial that reached its check step.
    """

    def __init__(
        self,
        *,
        keep_fraction: float = DEFAULT_KEEP_FRACTION,
        check_fraction: float = DEFAULT_CHECK_FRACTION,
        min_samples: int = DEFAULT_MIN_SAMPLES,
        trial_name: Callable[[dict[str, Any]], str] = _study_trial_name,
        planned_steps: Callable[[dict[str, Any]], int] = _study_trial_steps,
        rankme_steps: Callable[[int], Sequence[int]] = rankme_steps_for,
    ) -> None:
        validate_rule(keep_fraction=keep_fraction, check_fraction=check_fraction)
        if min_samples < 1:
            raise ValueError(f"min_samples (--min-samples) must be at least 1, got {min_samples}")
        super().__init__()
        self.keep_fraction = keep_fraction
        self.check_fraction = check_fraction
        self.min_samples = min_samples
        self._trial_name = trial_name
        self._planned_steps = planned_steps
        self._rankme_steps = rankme_steps
        self._seen_by_step: dict[int, list[float]] = defaultdict(list)
        self.checks: dict[str, TrialCheck] = {}
        self.rankme_histories: dict[str, dict[int, float]] = defaultdict(dict)

    # One result at a time: a buffered batch could carry a trial past its check step unseen.
    _supports_buffered_results = False

    def on_trial_result(self, tune_controller: Any, trial: Trial, result: dict) -> str:
        if keys.RANKME_METRIC not in result or "step" not in result:
            return TrialScheduler.CONTINUE
        name = self._trial_name(trial.config)
        step, rankme = int(result["step"]), float(result[keys.RANKME_METRIC])
        planned = self._planned_steps(trial.config)
        rankme_steps = self._rankme_steps(planned)
        if step not in rankme_steps and step != planned:
            # Training repeats its latest RankMe in every report; only RankMe steps measured it.
            return TrialScheduler.CONTINUE
        self.rankme_histories[name][step] = rankme
        if name in self.checks:
            return TrialScheduler.CONTINUE
        check_step = check_step_among(rankme_steps, planned, check_fraction=self.check_fraction)
        if step < check_step or check_step >= planned:
            return TrialScheduler.CONTINUE
        seen = self._seen_by_step[check_step]
        seen.append(rankme)
        stopped = should_stop(rankme, seen, keep_fraction=self.keep_fraction, min_samples=self.min_samples)
        self.checks[name] = TrialCheck(
            trial=name, planned_steps=planned, check_step=step, rankme=rankme, stopped=stopped
        )
        return TrialScheduler.STOP if stopped else TrialScheduler.CONTINUE

    def stopped_trials(self) -> dict[str, TrialCheck]:
        return {name: check for name, check in self.checks.items() if check.stopped}

    def debug_string(self) -> str:
        return f"RankMeEarlyStop: {len(self.stopped_trials())} of {len(self.checks)} checked trials stopped"


@dataclass(frozen=True, kw_only=True)
class EarlyStopSummary:
    """What the live scheduler saved, and whether it changed the study's pick."""

    stopped_at_step: dict[str, int]  # trial -> the step it was stopped at
    steps_saved_fraction: float  # of all trials' planned steps, the share not run
    best_finished: str | None  # best final Q among trials that finished
    best_simulated: str | None  # the offline rule's pick on the same RankMe curves
    best_changed: bool
    keep_fraction: float = DEFAULT_KEEP_FRACTION
    check_fraction: float = DEFAULT_CHECK_FRACTION

    def markdown(self) -> str:
        stopped = ", ".join(f"{t} at step {s}" for t, s in sorted(self.stopped_at_step.items())) or "none"
        if self.best_changed:
            verdict = (
                f"Best configuration changed: yes. The best finished trial is {self.best_finished}, but the rule "
                f"applied to all trials at once would have picked {self.best_simulated}: the order in which trials "
                "reached the decision step changed which ones the live run stopped."
            )
        else:
            verdict = (
                f"Best configuration changed: no. The best finished trial, {self.best_finished}, is also the pick "
                "of the rule applied to all trials at once on the same curves."
            )
        return "\n".join([
            "## RankMe early stopping (live)",
            "",
            f"Rule: keep the top {100 * self.keep_fraction:.0f}% by RankMe at "
            f"{100 * self.check_fraction:.0f}% of each trial's steps (sweeps.protocol.early_stop_rule).",
            f"Stopped trials: {stopped}. Steps saved: {100 * self.steps_saved_fraction:.0f}% of planned steps.",
            verdict,
        ])  # fmt: skip


def summarize_early_stop(
    *,
    planned_steps: dict[str, int],
    stopped_at_step: dict[str, int],
    check_rankme: dict[str, float],
    final_q: dict[str, float],
    keep_fraction: float = DEFAULT_KEEP_FRACTION,
    check_fraction: float = DEFAULT_CHECK_FRACTION,
) -> EarlyStopSummary:
    """Steps saved, and the live pick against the offline rule's pick.

    `planned_steps`: every trial of the study; `check_rankme`: RankMe at the decision step of
    every trial that reached it; `final_q`: Q of the trials that finished. The offline rule
    (`should_stop` with every check RankMe seen at once) picks the best final Q among the trials
    it keeps; a kept trial without a Q (stopped live) cannot be picked, and that disagreement is
    what `best_changed` flags. `check_fraction` is recorded for the report only.
    """
    total = sum(planned_steps.values())
    saved = sum(planned_steps[t] - step for t, step in stopped_at_step.items())
    finished = {t: q for t, q in final_q.items() if np.isfinite(q)}
    best_finished = max(finished, key=finished.get) if finished else None
    seen = list(check_rankme.values())
    stopped_offline = {t for t, r in check_rankme.items() if should_stop(r, seen, keep_fraction=keep_fraction)}
    candidates = {t: finished.get(t, -math.inf) for t in planned_steps if t not in stopped_offline}
    best_simulated = max(candidates, key=candidates.get) if candidates else None
    return EarlyStopSummary(
        stopped_at_step=dict(stopped_at_step),
        steps_saved_fraction=saved / total if total else 0.0,
        best_finished=best_finished,
        best_simulated=best_simulated,
        best_changed=best_finished != best_simulated,
        keep_fraction=keep_fraction,
        check_fraction=check_fraction,
    )


def summarize_study_table(
    table: pd.DataFrame,
    planned_steps: dict[str, int],
    *,
    keep_fraction: float = DEFAULT_KEEP_FRACTION,
    check_fraction: float = DEFAULT_CHECK_FRACTION,
) -> EarlyStopSummary:
    """`summarize_early_stop` from a study's trial table (sweeps.record.study), resumes included.

    A trial's check RankMe is its first logged RankMe at or after its decision step.
    """
    trial, stopped_at = keys.TRIAL_PARAM, keys.STOPPED_AT_STEP_COLUMN
    rows = table[table[trial].isin(planned_steps)]
    check_rankme: dict[str, float] = {}
    for name, history in zip(rows[trial], rows[keys.RANKME_BY_STEP_COLUMN]):
        point = rankme_at_decision(history, planned_steps[name], check_fraction=check_fraction)
        if point is not None:
            check_rankme[name] = point[1]
    stopped_column = rows.get(stopped_at, pd.Series(np.nan, index=rows.index)).astype(float)
    stopped_rows = rows[np.isfinite(stopped_column)]
    finished = zip(rows[trial], rows[keys.Q_METRIC], rows[keys.STATUS_COLUMN])
    return summarize_early_stop(
        planned_steps=planned_steps,
        stopped_at_step={t: int(s) for t, s in zip(stopped_rows[trial], stopped_rows[stopped_at])},
        check_rankme=check_rankme,
        final_q={t: float(q) for t, q, status in finished if status == keys.STATUS_OK},
        keep_fraction=keep_fraction,
        check_fraction=check_fraction,
    )
