"""What a person watching a study sees: one line per event that matters, with an ETA.

A Ray Tune callback on the driver: trial i/n started, RankMe at a step (when training reports
reach Tune: the early-stop scheduler's runs), trial finished with its R and Q (or failed), and an
estimate of the time left from the mean duration of finished trials and the concurrency. Lines go
to stderr with a `[study]` prefix and the wall clock, so they read well in a terminal and in
`ray job logs`. `--quiet` turns them off.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable

from ray.tune import Callback

from sweeps.record.keys import Q_METRIC, RANKME_METRIC


def _clock(seconds: float) -> str:
    seconds = max(0, int(round(seconds)))
    return f"{seconds // 60}m{seconds % 60:02d}s" if seconds >= 60 else f"{seconds}s"


def progress_writer(*, quiet: bool) -> Callable[[str], None]:
    """One `[study HH:MM:SS]` line on stderr per call (nothing when quiet)."""
    if quiet:
        return lambda text: None
    return lambda text: print(f"[study {time.strftime('%H:%M:%S')}] {text}", file=sys.stderr, flush=True)


class StudyProgress(Callback):
    def __init__(
        self,
        n_trials: int,
        *,
        max_concurrent: int,
        write: Callable[[str], None] | None = None,
        raised: Callable[[str], bool] = lambda name: False,
    ) -> None:
        """`raised(name)`: whether the trial recorded an error of its own in this run of the driver (Tune
        reruns it as it reruns a trial whose process was lost; only the second is worth a line)."""
        self.n_trials, self.max_concurrent = n_trials, max(1, max_concurrent)
        self.started: dict[str, float] = {}
        self.durations: list[float] = []
        self.n_failed = 0
        self.last_step: dict[str, int] = {}
        self.rerun: set[str] = set()  # trials Tune is running again
        self.raised = raised
        self.begun = time.monotonic()
        self._say = write or progress_writer(quiet=False)

    def eta(self) -> str:
        """Time left: unfinished trials x mean trial time / concurrency, minus what runs already did."""
        done = len(self.durations) + self.n_failed
        if not self.durations:
            return "ETA after the first trial"
        mean = sum(self.durations) / len(self.durations)
        now = time.monotonic()
        running = [min(mean, now - start) for start in self.started.values()]
        waiting = self.n_trials - done - len(running)
        left = (waiting * mean + sum(mean - spent for spent in running)) / self.max_concurrent
        return f"about {_clock(left)} left"

    def on_trial_start(self, iteration, trials, trial, **info) -> None:
        name = trial.config["trial"]["name"]
        if name in self.rerun:  # Tune's rerun of a trial whose process ended (on_trial_recover said so)
            self.started[name] = time.monotonic()
            self._say(f"trial {name} running again")
            return
        self.started[name] = time.monotonic()
        position = len(self.durations) + self.n_failed + len(self.started)
        self._say(f"trial {position}/{self.n_trials} started: {name}")

    def on_trial_recover(self, iteration, trials, trial, **info) -> None:
        """The trial ended without finishing and Tune runs it again (sweeps.study.driver.NODE_LOSS_RETRIES)."""
        name = trial.config["trial"]["name"]
        self.started.pop(name, None)
        self.rerun.add(name)
        if self.raised(name):
            return  # the trial raised: its rerun stops at once and on_trial_error reports it
        self._say(f"trial {name} lost its process (a lost node?); running it again, resumed from its last checkpoint")

    def on_trial_result(self, iteration, trials, trial, result, **info) -> None:
        name = trial.config["trial"]["name"]
        step = result.get("step")
        if result.get(RANKME_METRIC) is not None and step is not None and step != self.last_step.get(name):
            self.last_step[name] = step
            self._say(f"{name}: RankMe R {result[RANKME_METRIC]:.2f} at step {step}")

    def on_trial_complete(self, iteration, trials, trial, **info) -> None:
        name = trial.config["trial"]["name"]
        seconds = time.monotonic() - self.started.pop(name, time.monotonic())
        self.durations.append(seconds)
        result = trial.last_result or {}
        # What study_trainable reports to Tune once the trial is written: its Q and R.
        r, q = result.get(RANKME_METRIC), result.get(Q_METRIC)
        scores = f"R {r:.2f}, Q {q:.3f}" if q is not None and r is not None else "done"
        finished = len(self.durations) + self.n_failed
        self._say(f"trial {name} finished in {_clock(seconds)}: {scores} ({finished}/{self.n_trials}; {self.eta()})")

    def on_trial_error(self, iteration, trials, trial, **info) -> None:
        name = trial.config["trial"]["name"]
        self.started.pop(name, None)
        self.n_failed += 1
        self._say(f"trial {name} FAILED (its error is in the MLflow run's audioscale.trial_error tag; {self.eta()})")
