"""Trial rows -> checkpoint rows: one (R, Q) point per evaluated checkpoint of each trial.

Fig. 1a of the paper fits Q(R) over every checkpoint under compute constraints; a trial table
whose rows carry `checkpoint_points` ({step: {"rankme", "q", "score/<task>"}}, written by
sweeps.record.checkpoint_point) expands to one row per checkpoint. The bootstrap unit stays the
trial (`configuration`): checkpoints of one run are not independent, so they are resampled together.
Rows without points stay as they are (their last checkpoint is their only point).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from sweeps.record.keys import POINTS_COLUMN

STEP_COLUMN = "step"  # as the figures and summary read it (sweeps.report.figure_style)


def checkpoint_rows(trials: pd.DataFrame) -> pd.DataFrame:
    """One row per checkpoint point: the trial's name, its `step` and `is_last`."""
    if POINTS_COLUMN not in trials.columns:  # already one row per checkpoint, or one per trial
        return trials if STEP_COLUMN in trials.columns else trials.assign(**{STEP_COLUMN: np.nan, "is_last": True})
    rows = []
    for _, trial in trials.iterrows():
        points = trial[POINTS_COLUMN] if isinstance(trial[POINTS_COLUMN], dict) else {}
        base = trial.drop(labels=[POINTS_COLUMN]).to_dict()
        if not base.get("configuration"):  # the bootstrap unit: the trial, all its checkpoints together
            base["configuration"] = base.get("trial")
        if not points:
            rows.append({**base, STEP_COLUMN: np.nan, "is_last": True})
            continue
        last = max(points)
        for step, values in sorted(points.items()):
            # Each checkpoint's own Q interval where it was logged (the trial row's is the last one's).
            interval = {} if step == last else {key: values.get(key, np.nan) for key in ("q_ci_low", "q_ci_high")}
            rows.append({**base, **values, **interval, STEP_COLUMN: step, "is_last": step == last})
    # No usable trial: the empty table keeps its columns, so callers see "too few points", not a KeyError.
    return pd.DataFrame(rows) if rows else trials.assign(**{STEP_COLUMN: np.nan, "is_last": True})


def has_checkpoint_points(trials: pd.DataFrame) -> bool:
    return POINTS_COLUMN in trials.columns and any(isinstance(p, dict) and p for p in trials[POINTS_COLUMN])
