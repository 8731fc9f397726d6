"""The RankMe early-stopping rule, shared by the live Tune scheduler and the report's replay.

The rule: at a trial's decision step (the first RankMe step at or after `check_fraction` of its
planned steps) keep the trial when its RankMe is among the top ceil(keep_fraction x n) of the n
RankMe values seen at that step, its own included; stop it otherwise. A value tied with the last
kept one is kept (stopping is the costly mistake). Live, n counts the trials that reached the step
so far (`sweeps.study.early_stop`); replayed on a finished study, n is every trial
(`sweeps.report.early_prediction`, `replay_decision_point`). No Ray here: the report imports it.

A study trial measures RankMe at Table III's steps, or their fractions of a shorter horizon
(`sweeps.protocol.recipe.rankme_steps_for`: 7, 14, 29, 43 and 100 of a 100-step CPU trial).
The default keeps the top 40% at 25% of the steps: on the 5-trial CPU grid that keeps 2 and stops
3 at step 29 of 100, saving 3 x 71 / 500 = 43% of the planned steps (the issue asks >= 40%; keeping
half keeps 3 and saves only 28%). `planned_steps_saved_fraction` does that arithmetic.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from sweeps.protocol.recipe import rankme_steps_for

DEFAULT_KEEP_FRACTION = 0.4
DEFAULT_CHECK_FRACTION = 0.25
DEFAULT_MIN_SAMPLES = 3
STEPS_SAVED_TARGET = 0.40  # scaling-study issue #7: save this share of steps without changing the pick
CHECKPOINTS_PER_TRIAL = 4  # a study trial checkpoints at 25%, 50%, 75% and 100% of training


def validate_rule(*, keep_fraction: float, check_fraction: float) -> None:
    if not 0.0 < keep_fraction <= 1.0:
        raise ValueError(f"keep_fraction (--keep-fraction) must be in (0, 1], got {keep_fraction}")
    if not 0.0 < check_fraction < 1.0:
        raise ValueError(f"check_fraction (--check-fraction) must be in (0, 1), got {check_fraction}")


def checkpoint_every_steps_for(train_steps: int) -> int:
    """How often a study trial checkpoints (four checkpoints per trial: a resume loses little)."""
    return max(1, train_steps // CHECKPOINTS_PER_TRIAL)


def check_step_for(train_steps: int, *, rankme_every_steps: int, check_fraction: float) -> int:
    """The first RankMe step at or after `check_fraction` of the planned steps (the last step at most)."""
    earliest = max(1, math.ceil(check_fraction * train_steps))
    return min(train_steps, rankme_every_steps * math.ceil(earliest / rankme_every_steps))


def check_step_among(rankme_steps: Sequence[int], train_steps: int, *, check_fraction: float) -> int:
    """The first of `rankme_steps` at or after `check_fraction` of the planned steps (else the last step)."""
    earliest = max(1, math.ceil(check_fraction * train_steps))
    return min([step for step in rankme_steps if earliest <= step <= train_steps] or [train_steps])


def decision_step_for(train_steps: int, *, check_fraction: float = DEFAULT_CHECK_FRACTION) -> int:
    """A study trial's decision step: `check_step_among` the study's RankMe steps."""
    return check_step_among(rankme_steps_for(train_steps), train_steps, check_fraction=check_fraction)


def n_trials_kept(n_trials: int, keep_fraction: float) -> int:
    """ceil(keep_fraction x n_trials), at least one; exact for fractions like 0.4 x 5 (not 3)."""
    if n_trials <= 0:
        return 0
    return max(1, math.ceil(round(keep_fraction * n_trials, 9)))


def should_stop(rankme: float, seen_at_step: Sequence[float], *, keep_fraction: float, min_samples: int = 1) -> bool:
    """Stop unless `rankme` is among the top `n_trials_kept` of `seen_at_step` (which includes it).

    Fewer than `min_samples` values seen: keep (a rank among one or two values says nothing).
    """
    if len(seen_at_step) < min_samples:
        return False
    n_higher = sum(1 for other in seen_at_step if other > rankme)
    return n_higher >= n_trials_kept(len(seen_at_step), keep_fraction)


def planned_steps_saved_fraction(
    n_trials: int,
    train_steps: int,
    *,
    keep_fraction: float = DEFAULT_KEEP_FRACTION,
    check_fraction: float = DEFAULT_CHECK_FRACTION,
) -> float:
    """Share of a grid's planned steps the rule saves when every trial has `train_steps` steps and
    the decision sees all trials: (n - kept) x (steps - decision step) / (n x steps)."""
    if n_trials <= 0 or train_steps <= 0:
        return 0.0
    stopped = n_trials - n_trials_kept(n_trials, keep_fraction)
    decision = decision_step_for(train_steps, check_fraction=check_fraction)
    return stopped * (train_steps - decision) / (n_trials * train_steps)


def rankme_at_decision(
    history: Mapping[int, float], planned_steps: int, *, check_fraction: float
) -> tuple[int, float] | None:
    """(step, RankMe) of the first logged RankMe at or after the decision step; None when the trial
    has none there or the decision step is its last step (nothing left to save)."""
    decision = decision_step_for(planned_steps, check_fraction=check_fraction)
    later = sorted(int(step) for step in history if int(step) >= decision)
    if not later or decision >= planned_steps:
        return None
    return later[0], float(history[later[0]])


def _name_list(names: Sequence[str], shown: int = 8) -> str:
    if not names:
        return "none"
    more = f", and {len(names) - shown} more" if len(names) > shown else ""
    return ", ".join(names[:shown]) + more


@dataclass(frozen=True, kw_only=True)
class DecisionReplay:
    """The rule replayed at the decision step on a finished study's RankMe curves."""

    keep_fraction: float
    check_fraction: float
    decision_step: dict[str, int]  # trial -> the step the rule decides at
    kept: list[str]  # ordered by RankMe at the decision, highest first
    stopped: list[str]
    steps_saved_fraction: float  # of all trials' planned steps
    best: str | None  # highest final Q over all trials
    best_q: float
    best_kept: bool
    best_kept_trial: str | None  # highest final Q among the kept trials
    best_kept_q: float

    def markdown(self) -> str:
        """Plain sentences: the rule, steps saved against the target, and the best configuration's fate."""
        n = len(self.kept) + len(self.stopped)
        steps = sorted(set(self.decision_step.values()))
        at = f"step {steps[0]}" if len(steps) == 1 else f"steps {steps[0]}-{steps[-1]}"
        met = "meets" if self.steps_saved_fraction >= STEPS_SAVED_TARGET - 1e-12 else "falls short of"
        lines = [
            f"Rule: at the first RankMe step at or after {100 * self.check_fraction:.0f}% of a trial's steps "
            f"({at}), keep the top {100 * self.keep_fraction:.0f}% by RankMe "
            f"({len(self.kept)} of {n}: {_name_list(self.kept)}) and stop the rest "
            f"({_name_list(self.stopped)}).",
            f"Steps saved: {100 * self.steps_saved_fraction:.0f}% of the planned steps, which {met} the "
            f"{100 * STEPS_SAVED_TARGET:.0f}% target.",
        ]
        if self.best is None:
            lines.append("No trial has a final Q, so the effect on the best configuration is unknown.")
        elif self.best_kept:
            lines.append(
                f"The best configuration by final Q ({self.best}, Q {self.best_q:.4f}) is among the kept trials: "
                "early stopping would not have changed the study's pick."
            )
        else:
            instead = (
                f"changed the study's pick to {self.best_kept_trial} (Q {self.best_kept_q:.4f})"
                if self.best_kept_trial is not None
                else "left no kept trial with a final Q"
            )
            lines.append(
                f"The best configuration by final Q ({self.best}, Q {self.best_q:.4f}) was NOT kept: this rule "
                f"would have stopped it at step {self.decision_step[self.best]} and {instead}."
            )
        return " ".join(lines)


def replay_decision_point(
    rankme_by_step: Mapping[str, Mapping[int, float]],
    final_q: Mapping[str, float],
    planned_steps: Mapping[str, int],
    *,
    keep_fraction: float = DEFAULT_KEEP_FRACTION,
    check_fraction: float = DEFAULT_CHECK_FRACTION,
) -> DecisionReplay | None:
    """Apply `should_stop` to every trial at its decision step, all trials seen at once.

    Trials without a RankMe at their decision step are kept (the rule cannot judge them).
    None when fewer than two trials have a RankMe there: ranking one value decides nothing.
    """
    validate_rule(keep_fraction=keep_fraction, check_fraction=check_fraction)
    at_decision = {
        trial: point
        for trial, history in rankme_by_step.items()
        if (point := rankme_at_decision(history, planned_steps[trial], check_fraction=check_fraction)) is not None
    }
    if len(at_decision) < 2:
        return None
    seen = [rankme for _, rankme in at_decision.values()]
    stopped = sorted(t for t, (_, r) in at_decision.items() if should_stop(r, seen, keep_fraction=keep_fraction))
    kept = sorted((t for t in rankme_by_step if t not in stopped), key=lambda t: -at_decision.get(t, (0, -np.inf))[1])
    total = sum(planned_steps[t] for t in rankme_by_step)
    saved = sum(planned_steps[t] - at_decision[t][0] for t in stopped)
    finished = {t: float(q) for t, q in final_q.items() if np.isfinite(q)}
    best = max(finished, key=finished.get) if finished else None
    kept_finished = {t: finished[t] for t in kept if t in finished}
    best_kept_trial = max(kept_finished, key=kept_finished.get) if kept_finished else None
    return DecisionReplay(
        keep_fraction=keep_fraction,
        check_fraction=check_fraction,
        decision_step={t: step for t, (step, _) in at_decision.items()},
        kept=kept,
        stopped=stopped,
        steps_saved_fraction=saved / total if total else 0.0,
        best=best,
        best_q=finished.get(best, math.nan) if best else math.nan,
        best_kept=best is not None and best in kept,
        best_kept_trial=best_kept_trial,
        best_kept_q=kept_finished.get(best_kept_trial, math.nan) if best_kept_trial else math.nan,
    )
