"""Which laws a study's trial table supports, and their fits.

A trial table is a pandas DataFrame with one row per (trial, seed): n_params, hours, flops,
mask_ratio, arch, rankme, rankme_by_step ({step: rankme}), q, and per-task score columns named
`score/<task>`; an optional `status` column ("ok" or anything else for a failed trial) and an
optional `configuration` column (the bootstrap unit; by default rows with equal inputs).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from sweeps.laws.fit import FitNotConvergedError
from sweeps.laws.fits import fit_joint, fit_saturating
from sweeps.laws.result import LawFit

TASK_SCORE_PREFIX = "score/"
# Q(X) needs this many distinct X values (not just points: seeds of one X do not identify a law).
MIN_DISTINCT_SCALES = 4

# name -> (column, human label)
SATURATING_LAWS = {
    "Q(R)": ("rankme", "RankMe R"),
    "Q(N)": ("n_params", "parameters N"),
    "Q(D)": ("hours", "pretraining hours D"),
    "Q(C)": ("flops", "training FLOPs C"),
}


@dataclass(frozen=True, kw_only=True)
class StudyFits:
    fits: dict[str, LawFit]  # law name -> fit
    skipped: dict[str, str]  # law name -> why it was not fitted
    n_trials_used: int
    n_trials_failed: int


def usable_trials(table: pd.DataFrame) -> tuple[pd.DataFrame, int]:
    """Rows with a finite Q and status ok; and how many rows were left out."""
    ok = np.isfinite(pd.to_numeric(table["q"], errors="coerce"))
    if "status" in table.columns:
        ok &= table["status"].fillna("ok").eq("ok")
    return table[ok].reset_index(drop=True), int((~ok).sum())


def _groups(rows: pd.DataFrame) -> np.ndarray | None:
    return rows["configuration"].to_numpy() if "configuration" in rows.columns else None


def _rows_for(trials: pd.DataFrame, column: str) -> pd.DataFrame:
    """Q(N) at the largest D and Q(D) at the largest N, so the other axis does not leak in."""
    other = {"n_params": "hours", "hours": "n_params"}.get(column)
    if other is None or other not in trials.columns or trials[other].nunique() <= 1:
        return trials
    return trials[trials[other] == trials[other].max()]


def fit_study_laws(table: pd.DataFrame, *, n_bootstrap: int = 200, seed: int = 0) -> StudyFits:
    """Fit every law the table's variation supports; record why the others were skipped."""
    trials, n_failed = usable_trials(table)
    fits: dict[str, LawFit] = {}
    skipped: dict[str, str] = {}
    for name, (column, label) in SATURATING_LAWS.items():
        if column not in trials.columns:
            skipped[name] = f"the trial table has no {column} column"
            continue
        rows = _rows_for(trials, column)
        n_distinct = rows[column].nunique()
        if n_distinct < MIN_DISTINCT_SCALES:
            skipped[name] = f"only {n_distinct} distinct {label} value(s); need >= {MIN_DISTINCT_SCALES}"
            continue
        try:
            fits[name] = fit_saturating(
                rows[column], rows["q"], groups=_groups(rows), n_bootstrap=n_bootstrap, seed=seed
            )
        except (ValueError, FitNotConvergedError) as error:
            skipped[name] = str(error)
    if {"n_params", "hours"} <= set(trials.columns) and min(
        trials["n_params"].nunique(), trials["hours"].nunique()
    ) >= 2:
        try:
            fits["Q(N,D)"] = fit_joint(
                trials["n_params"],
                trials["hours"],
                trials["q"],
                groups=_groups(trials),
                n_bootstrap=n_bootstrap,
                seed=seed,
            )
        except (ValueError, FitNotConvergedError) as error:
            skipped["Q(N,D)"] = str(error)
    else:
        skipped["Q(N,D)"] = "needs at least 2 values of both n_params and hours (a size x data_volume grid)"
    return StudyFits(fits=fits, skipped=skipped, n_trials_used=len(trials), n_trials_failed=n_failed)


def task_score_columns(table: pd.DataFrame) -> list[str]:
    return [c for c in table.columns if c.startswith(TASK_SCORE_PREFIX)]
