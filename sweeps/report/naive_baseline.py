"""The naive baseline every learned representation must beat, per default task.

Mean and std of the log-mel over time -> logistic regression, test accuracy on the embedded
default tasks: the README's task table ("naive" column), computed by `python -m pipeline.corpus
baseline` (pipeline.corpus.tasks.baseline). The tasks directory stores no baseline results, so
the values are kept here; rebuild them with that command when the default tasks change.
"""

from __future__ import annotations

# README "Labeled tasks" table, column "naive" (python -m pipeline.corpus baseline).
NAIVE_BASELINE = {
    "language_real": 0.737,
    "language_synthetic": 0.500,
    "spoken_digits": 0.768,
    "pitch": 0.932,
    "instrument_family": 0.384,
    "drum_type": 0.746,
    "speaker_count": 0.380,
}
NAIVE_BASELINE_SOURCE = "log-mel mean/std + logistic regression, `python -m pipeline.corpus baseline`"


def naive_mean(tasks: list[str] | None = None) -> float:
    """Mean naive score over `tasks` (default: all seven), the counterpart of Q on the same tasks."""
    names = [t for t in (tasks or NAIVE_BASELINE) if t in NAIVE_BASELINE]
    return sum(NAIVE_BASELINE[t] for t in names) / len(names) if names else float("nan")
