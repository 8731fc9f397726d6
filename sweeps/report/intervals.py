"""When a 95% interval of Q is worth printing: one rule for the report, the figures and the CLI.

Q's t-interval over 2 probe seeds uses t(0.975, 1) = 12.7: two seeds that differ by 0.06 give
-0.29..1.34, an interval wider than Q's whole range that says nothing. The linear and kNN probes
have no random state (pipeline.evaluate.probes.scene), so their seeds repeat one score and the
interval is zero wide by construction, not by measurement. Such intervals are declared "n/a" with
the reason, never clipped into [0, 1] (a clipped interval would look informative). Their noise is
the test split's instead: a bootstrap over test clips (`q_interval_over` "test clips",
pipeline.evaluate.probes.bootstrap) gives them an interval that is judged on its own.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from sweeps.record.keys import Q_INTERVAL_OVER_TEST_CLIPS
from sweeps.report.study_info import StudyInfo

MIN_SEEDS = 3  # with 2 seeds t(0.975, 1) = 12.7 makes the interval span ~18 sample std
DETERMINISTIC_PROBES = ("linear", "knn")  # seeds repeat one score: zero spread by construction
Q_RANGE = (0.0, 1.0)  # Q is a mean of accuracies / mAPs
TEST_CLIPS = Q_INTERVAL_OVER_TEST_CLIPS  # `q_interval_over` of a bootstrap over test clips
Z_95 = 1.959964  # two-sided 95% normal quantile


@dataclass(frozen=True)
class IntervalVerdict:
    bounds: tuple[float, float] | None  # None: not informative
    reason: str  # why not ("" when informative)

    def cell(self, digits: int = 3) -> str:
        if self.bounds is None:
            return f"n/a ({self.reason})"
        return f"{self.bounds[0]:.{digits}f}-{self.bounds[1]:.{digits}f}"


def _number(value) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan


def informative_interval(low, high, n_seeds=None, probe: str | None = None, over: str | None = None) -> IntervalVerdict:
    """The interval when it can inform, else None with the reason.

    `n_seeds` (None/0/NaN: unknown, the interval is judged on its own) and `probe` (the scene probe's
    name) come from the study; `low`/`high` may be NaN (one seed, or not recorded). `over` says what
    the interval resamples: "test clips" (the deterministic probes' bootstrap) is judged on its own,
    since neither the seeds nor the probe's lack of random state bear on it.
    """
    low, high, seeds = _number(low), _number(high), _number(n_seeds)
    if over == TEST_CLIPS:
        seeds, probe = math.nan, None
    if (probe or "") in DETERMINISTIC_PROBES:
        return IntervalVerdict(None, "deterministic probe")
    if math.isfinite(seeds) and 0 < seeds < MIN_SEEDS:
        return IntervalVerdict(None, f"{int(seeds)} seed{'s' if seeds != 1 else ''}")
    if not (math.isfinite(low) and math.isfinite(high)):
        return IntervalVerdict(None, "not recorded")
    if low < Q_RANGE[0] or high > Q_RANGE[1]:
        return IntervalVerdict(None, "wider than Q's range [0, 1]")
    if high - low <= 0:
        return IntervalVerdict(None, "zero width")
    return IntervalVerdict((low, high), "")


def q_intervals(trials: pd.DataFrame, info: StudyInfo) -> list[IntervalVerdict]:
    """The verdict on every row's Q interval (`q_ci_low` / `q_ci_high`, the study's probe and seeds)."""
    nan = pd.Series(np.nan, index=trials.index)
    low, high = trials.get("q_ci_low", nan), trials.get("q_ci_high", nan)
    over = trials.get("q_interval_over", pd.Series("", index=trials.index))
    return [
        informative_interval(lo, hi, seeds, info.probe, kind if isinstance(kind, str) else "")
        for lo, hi, seeds, kind in zip(low, high, info.seeds_of(trials), over)
    ]
