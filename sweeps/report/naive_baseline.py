"""The naive baseline every learned representation must beat, per default task.

Mean and std of the log-mel over time -> logistic regression, test accuracy on the embedded
default tasks: the README's task table ("naive" column), computed by `python -m pipeline.corpus
baseline` (pipeline.corpus.tasks.baseline). The tasks directory stores no baseline results, so
the values are kept here; rebuild them with that command when the default tasks change.
"""

from __future__ import annotations

# The README's task table (under "The stages"), column "naive" (python -m pipeline.corpus baseline).
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

# The same features (log-mel mean/std over time, 128 bins) under the study's own deterministic
# probes, which is the comparison within one probe that Q allows (pipeline.evaluate.probes.scene):
# column "naive features" of `python benchmarks/q_noise_floor.py` (docs/results.md, the noise floor of Q).
# The MLP probes have no such table: their study compares with the logistic-regression one only.
NAIVE_BASELINE_BY_PROBE = {
    "knn": {
        "language_real": 0.709,
        "language_synthetic": 0.267,
        "spoken_digits": 0.705,
        "pitch": 0.757,
        "instrument_family": 0.395,
        "drum_type": 0.681,
        "speaker_count": 0.465,
    },
    # The pipeline's linear probe reproduces the logistic-regression table within its noise (Q 0.640 vs 0.635).
    "linear": {
        "language_real": 0.767,
        "language_synthetic": 0.500,
        "spoken_digits": 0.766,
        "pitch": 0.932,
        "instrument_family": 0.384,
        "drum_type": 0.746,
        "speaker_count": 0.383,
    },
}


def same_probe_baseline(probe: str) -> list[tuple[dict[str, float], str]]:
    """[(table, source)] of the naive features under `probe`, or [] where none was measured."""
    if probe not in NAIVE_BASELINE_BY_PROBE:
        return []
    return [
        (
            NAIVE_BASELINE_BY_PROBE[probe],
            f"the same features under the study's {probe} probe, benchmarks/q_noise_floor.py",
        )
    ]


def naive_mean(tasks: list[str] | None = None, table: dict[str, float] | None = None) -> float:
    """Mean naive score over `tasks` (default: all seven), the counterpart of Q on the same tasks."""
    table = NAIVE_BASELINE if table is None else table
    names = [t for t in (tasks or table) if t in table]
    return sum(table[t] for t in names) / len(names) if names else float("nan")
