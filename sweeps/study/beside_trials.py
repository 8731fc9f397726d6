"""Work the study driver does beside its trials, started once the last trial has started.

With one trial per core, the last trials of a grid leave cores idle while they end (the fifth of 5
on 2 cores runs alone); work started then fills them (sweeps.study.baselines: the baselines).
A Tune callback, so that the start follows Tune's own trial starts, reruns of a lost trial counted once.
"""

from __future__ import annotations

from ray import tune


class StartOnceEveryTrialStarted(tune.Callback):
    """Calls `start` once the last of `n_trials` trials has started (sweeps.study.baselines says why)."""

    def __init__(self, n_trials: int, start) -> None:
        self.n_trials, self.start, self.started = n_trials, start, set()

    def __getstate__(self) -> dict:  # Tune pickles its callbacks with the experiment; a thread cannot be
        return {**self.__dict__, "start": None}  # a restored copy starts nothing (the driver waits, and starts)

    def on_trial_start(self, iteration, trials, trial, **info) -> None:
        self.started.add(trial.trial_id)
        if len(self.started) >= self.n_trials and self.start is not None:
            self.start()
