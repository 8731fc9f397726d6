"""Which laws a study's trial table supports, and their fits.

A trial table is a pandas DataFrame with one row per (trial, seed) (its last checkpoint; Q(R) and
the per-task laws also use the earlier checkpoints in `checkpoint_points`, sweeps.report.checkpoints): n_params, hours, flops,
mask_ratio, arch, rankme, rankme_by_step ({step: rankme}), q, and per-task score columns named
`score/<task>`; optional columns: `status` ("ok" or anything else for a failed trial),
`configuration` (the bootstrap unit; by default rows with equal inputs), `train_steps` (the planned
horizon, for early prediction) and `converged` (true when validation loss had stopped falling:
Fig. 1b's view).

Every law is fitted with the reference estimator (paper App. E: least squares on Q) and, beside it,
the log-error alternative; the report adds the alternative where the two disagree.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from sweeps.laws.envelope import fit_envelope
from sweeps.laws.fits import LOG_ERROR, fit_joint, fit_saturating
from sweeps.laws.frontier import frontier_mask
from sweeps.laws.optimizer import FitNotConvergedError
from sweeps.laws.result import LawFit
from sweeps.record.keys import CONVERGED_KEY, Q_METRIC
from sweeps.record.trial import is_true_text
from sweeps.report.architectures import fit_architecture_laws
from sweeps.report.checkpoints import checkpoint_rows
from sweeps.report.study_info import law_not_on_grid
from sweeps.report.task_laws import TaskLaw, fit_task_laws, task_score_columns

__all__ = ["StudyFits", "fit_study_laws", "task_score_columns", "usable_trials"]

# Q(X) needs this many distinct X values (not just points: seeds of one X do not identify a law).
MIN_DISTINCT_SCALES = 4
CONVERGED_VIEW = "Q(R) converged"  # paper Fig. 1b: converged checkpoints only

# name -> (column, human label)
SATURATING_LAWS = {
    "Q(R)": ("rankme", "RankMe R"),
    "Q(N)": ("n_params", "parameters N"),
    "Q(D)": ("hours", "pretraining hours D"),
    "Q(C)": ("flops", "training FLOPs C"),
}


@dataclass(frozen=True, kw_only=True)
class StudyFits:
    fits: dict[str, LawFit]  # law name -> reference fit (paper App. E)
    skipped: dict[str, str]  # law name -> why it was not fitted
    n_trials_used: int
    n_trials_failed: int
    alternatives: dict[str, LawFit] = field(default_factory=dict)  # law name -> log-error fit
    # law name -> why a cross-check (the log-error alternative, Q(C)'s envelope) failed: reported.
    fit_failures: dict[str, str] = field(default_factory=dict)
    # Q(N) / Q(D) on a grid that varies both: which slice of the other axis each was fitted on.
    slices: dict[str, str] = field(default_factory=dict)
    # Per usable trial (usable_trials' order): on the Q(C) efficiency frontier; None without flops.
    q_c_frontier: np.ndarray | None = None
    task_laws: dict[str, TaskLaw] = field(default_factory=dict)
    task_skipped: dict[str, str] = field(default_factory=dict)
    # An architecture study's one Q(R) per architecture (Sec. IV-G), and why an architecture has none.
    architecture_fits: dict[str, LawFit] = field(default_factory=dict)
    architecture_skipped: dict[str, str] = field(default_factory=dict)


def usable_trials(table: pd.DataFrame) -> tuple[pd.DataFrame, int]:
    """Rows with a finite Q and status ok; and how many rows were left out."""
    ok = np.isfinite(pd.to_numeric(table[Q_METRIC], errors="coerce"))
    if "status" in table.columns:
        ok &= table["status"].fillna("ok").eq("ok")
    return table[ok].reset_index(drop=True), int((~ok).sum())


def converged_rows(trials: pd.DataFrame) -> pd.Series:
    """The `converged` column as booleans (MLflow hands back text: "True", "1", "1.0")."""
    return trials[CONVERGED_KEY].map(is_true_text)


def _groups(rows: pd.DataFrame) -> np.ndarray | None:
    return rows["configuration"].to_numpy() if "configuration" in rows.columns else None


# The paper's slices of a size x data grid: Q(D) is measured on en768-12 models (Sec. IV-C: "we
# train a series of en768-12 models under varying data sizes"), Q(N) on 10,666 h (Sec. IV-D: "we
# trained a series of models using 10,666 hours of audio data"). Where the grid has no such slice,
# the report uses the largest value of the other axis and says so (`slice_note`).
PAPER_Q_OF_D_MODEL = "mae-en768-12"
PAPER_Q_OF_N_HOURS = 10_666.0


def law_slice(trials: pd.DataFrame, column: str) -> tuple[pd.DataFrame, str]:
    """The rows Q(N) or Q(D) is fitted to on a grid that varies both, and a sentence saying which;
    every row and "" for the other laws or a one-axis grid."""
    other = {"n_params": "hours", "hours": "n_params"}.get(column)
    if other is None or other not in trials.columns or trials[other].nunique() <= 1:
        return trials, ""
    if column == "hours" and "model_name" in trials.columns and trials["model_name"].eq(PAPER_Q_OF_D_MODEL).any():
        return trials[
            trials["model_name"] == PAPER_Q_OF_D_MODEL
        ], f"on {PAPER_Q_OF_D_MODEL}, the paper's slice (Sec. IV-C)"
    if column == "n_params" and np.isclose(trials["hours"], PAPER_Q_OF_N_HOURS).any():
        rows = trials[np.isclose(trials["hours"], PAPER_Q_OF_N_HOURS)]
        return rows, f"at {PAPER_Q_OF_N_HOURS:,.0f} h, the paper's slice (Sec. IV-D)"
    largest = trials[other].max()
    paper = f"{PAPER_Q_OF_D_MODEL} (Sec. IV-C)" if column == "hours" else f"{PAPER_Q_OF_N_HOURS:,.0f} h (Sec. IV-D)"
    label = f"{largest:,.4g} parameters" if other == "n_params" else f"{largest:,.4g} h"
    return trials[trials[other] == largest], f"at the grid's largest {other} ({label}): the grid has no {paper} slice"


def _rows_for(trials: pd.DataFrame, column: str) -> pd.DataFrame:
    return law_slice(trials, column)[0]


def parameters_disagree(reference: LawFit, alternative: LawFit) -> list[str]:
    """Parameters whose two bootstrap intervals do not overlap (empty without intervals). Ends that
    agree to 1e-9 touch: the reference reaches a bound like Q_inf = 1 only as 1 - 1e-13."""

    def apart(high: float, low: float) -> bool:
        return high < low and not math.isclose(high, low, rel_tol=1e-9, abs_tol=1e-12)

    return sorted(
        name
        for name in reference.ci.keys() & alternative.ci.keys()
        if apart(reference.ci[name][1], alternative.ci[name][0])
        or apart(alternative.ci[name][1], reference.ci[name][0])
    )


def _fit_both(fit_function, *columns, name: str, rows: pd.DataFrame, out: dict, n_bootstrap: int, seed: int) -> None:
    """Reference fit into out['fits'], log-error alternative into out['alternatives'], or a reason."""
    kwargs = {"groups": _groups(rows), "n_bootstrap": n_bootstrap, "seed": seed}
    try:
        out["fits"][name] = fit_function(*columns, rows[Q_METRIC], **kwargs)
    except (ValueError, FitNotConvergedError) as error:
        out["skipped"][name] = str(error)
        return
    try:
        out["alternatives"][name] = fit_function(*columns, rows[Q_METRIC], estimator=LOG_ERROR, **kwargs)
    except (ValueError, FitNotConvergedError) as error:
        # The alternative is a cross-check: its failure does not hide the reference fit, and the
        # report says it failed rather than showing no disagreement.
        out["failures"][name] = f"the log-error cross-check failed: {error}"


def _fit_envelope(trials: pd.DataFrame, out: dict, *, n_bootstrap: int, seed: int) -> None:
    """Q(C) as the curve no run surpasses (sweeps.laws.envelope) replaces the least-squares fit to
    the frontier points; where no feasible envelope is found, that fit stays and the report says so."""
    try:
        out["fits"]["Q(C)"] = fit_envelope(
            trials["flops"], trials[Q_METRIC], groups=_groups(trials), n_bootstrap=n_bootstrap, seed=seed
        )
    except (ValueError, FitNotConvergedError) as error:
        out["failures"]["Q(C) envelope"] = f"{error}; Q(C) shown is least squares on the frontier points"


def _saturating_rows(trials: pd.DataFrame, name: str, column: str, frontier: np.ndarray | None) -> pd.DataFrame:
    if name == "Q(R)":
        return checkpoint_rows(trials)  # Fig. 1a: every evaluated checkpoint (the last only, without points)
    if name == "Q(C)" and frontier is not None:
        return trials[frontier]  # Eq. 6 describes the frontier (Sec. IV-E), not every run
    if name == CONVERGED_VIEW:
        return trials[converged_rows(trials)]
    return _rows_for(trials, column)


def fit_study_laws(table: pd.DataFrame, *, n_bootstrap: int = 200, seed: int = 0, grid: str | None = None) -> StudyFits:
    """Fit every law the table's variation supports; record why the others were skipped.

    `grid` (the study's --grid): a law is fitted only along an axis the grid varies on purpose (a
    mask-ratio study's FLOPs differ slightly, which is no compute axis); None: judge by the table.
    """
    trials, n_failed = usable_trials(table)
    out: dict[str, dict] = {"fits": {}, "alternatives": {}, "skipped": {}, "failures": {}}
    on_compute_grid = law_not_on_grid("Q(C)", grid) is None
    frontier = (
        frontier_mask(trials["flops"], trials[Q_METRIC]) if "flops" in trials.columns and on_compute_grid else None
    )
    laws = dict(SATURATING_LAWS)
    if CONVERGED_KEY in trials.columns:
        laws[CONVERGED_VIEW] = ("rankme", "RankMe R of converged checkpoints")
    else:
        out["skipped"][CONVERGED_VIEW] = (
            "the trial table has no `converged` column (pretraining did not report convergence), "
            "so Fig. 1b's converged-only view cannot be drawn"
        )
    for name, (column, label) in laws.items():
        if (off_grid := law_not_on_grid(name, grid)) is not None:
            out["skipped"][name] = off_grid
            continue
        if column not in trials.columns:
            out["skipped"][name] = f"the trial table has no {column} column"
            continue
        rows = _saturating_rows(trials, name, column, frontier)
        n_distinct = rows[column].nunique()
        if n_distinct < MIN_DISTINCT_SCALES:
            where = " on the compute frontier" if name == "Q(C)" else ""
            out["skipped"][name] = f"only {n_distinct} distinct {label} value(s){where}; need >= {MIN_DISTINCT_SCALES}"
            continue
        _fit_both(fit_saturating, rows[column], name=name, rows=rows, out=out, n_bootstrap=n_bootstrap, seed=seed)
        if name == "Q(C)" and frontier is not None and name in out["fits"]:
            _fit_envelope(trials, out, n_bootstrap=n_bootstrap, seed=seed)
    if (off_grid := law_not_on_grid("Q(N,D)", grid)) is not None:
        out["skipped"]["Q(N,D)"] = off_grid
    elif {"n_params", "hours"} <= set(trials.columns) and min(
        trials["n_params"].nunique(), trials["hours"].nunique()
    ) >= 2:
        _fit_both(
            fit_joint, trials["n_params"], trials["hours"], name="Q(N,D)", rows=trials, out=out,
            n_bootstrap=n_bootstrap, seed=seed,
        )  # fmt: skip
    else:
        out["skipped"]["Q(N,D)"] = "needs at least 2 values of both n_params and hours (a size x data_volume grid)"
    task_laws, task_skipped = fit_task_laws(
        checkpoint_rows(trials), min_distinct=MIN_DISTINCT_SCALES, n_bootstrap=n_bootstrap, seed=seed
    )
    architecture_fits, architecture_skipped = fit_architecture_laws(
        trials, min_distinct=MIN_DISTINCT_SCALES, n_bootstrap=n_bootstrap, seed=seed
    )
    slices = {name: law_slice(trials, column)[1] for name, column in (("Q(N)", "n_params"), ("Q(D)", "hours"))}
    return StudyFits(
        slices={name: note for name, note in slices.items() if note and name in out["fits"]},
        fits=out["fits"], skipped=out["skipped"], n_trials_used=len(trials), n_trials_failed=n_failed,
        alternatives=out["alternatives"], fit_failures=out["failures"], q_c_frontier=frontier, task_laws=task_laws, task_skipped=task_skipped,
        architecture_fits=architecture_fits, architecture_skipped=architecture_skipped,
    )  # fmt: skip
