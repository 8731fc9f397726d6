"""The study in a few lines: the Q(R) fit with intervals and R², the trend verdict, the best
configuration against its initialisation and the naive baseline. The study run's MLflow description
and the closing lines of `python -m sweeps.scaling` are these lines."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from sweeps.record.keys import Q_METRIC, TASK_SCORE_PREFIX
from sweeps.report.checkpoints import checkpoint_rows
from sweeps.report.fits import StudyFits, task_score_columns, usable_trials
from sweeps.report.intervals import Z_95, IntervalVerdict, q_intervals
from sweeps.report.naive_baseline import (
    NAIVE_BASELINE,
    NAIVE_BASELINE_SOURCE,
    naive_mean,
    same_probe_baseline,
)
from sweeps.report.q_of_r_markdown import point_names
from sweeps.report.q_trend import check_q_of_r
from sweeps.report.study_info import StudyInfo, rankme_axis_label
from sweeps.report.task_laws import NO_CEILING, q_inf_pinned_at_one

MLFLOW_UI_PORT = 5000


def _ci_text(fit, key: str) -> str:
    if key not in fit.ci:
        return ""
    low, high = fit.ci[key]
    if q_inf_pinned_at_one(fit, key):
        return f" ({NO_CEILING})"
    return f" (95% {low:.4g}-{high:.4g})"


def fit_line(study: StudyFits) -> str:
    """'Q(R) fit: q_inf 0.61 (95% 0.60-0.63), ...; R² 0.912 over 20 points', or why there is none."""
    fit = study.fits.get("Q(R)")
    if fit is None:
        return f"Q(R) not fitted: {study.skipped.get('Q(R)', 'no RankMe')}"
    params = ", ".join(f"{key} {value:.4g}{_ci_text(fit, key)}" for key, value in fit.params.items())
    r2 = f"{fit.r2:.3f}" if np.isfinite(fit.r2) else "undefined"
    return f"Q(R) fit: {params}; R² {r2} over {fit.n_points} points"


def noise_note(difference: float, intervals: list[IntervalVerdict]) -> str:
    """Whether a difference of two Q values stands out of their intervals' noise: unpaired, so
    conservative (two checkpoints scored on the same test clips share part of their luck;
    benchmarks/q_noise_floor.py pairs them). "" when either interval is not informative."""
    if any(v.bounds is None for v in intervals):
        return ""
    standard_error = np.sqrt(sum(((v.bounds[1] - v.bounds[0]) / (2 * Z_95)) ** 2 for v in intervals))
    word = "beyond" if abs(difference) > Z_95 * standard_error else "within"
    return f"; {word} the noise of the intervals (unpaired: +-{Z_95 * standard_error:.4f})"


def _initialisation_line(trials: pd.DataFrame, best_index: int, intervals: list[IntervalVerdict]) -> str | None:
    """The best point's Q against its own trial's step-0 checkpoint, when rows are checkpoints."""
    if "step" not in trials.columns or "trial" not in trials.columns:
        return None
    best = trials.iloc[best_index]
    steps = pd.to_numeric(trials["step"], errors="coerce").to_numpy()
    initial = np.flatnonzero((trials["trial"].to_numpy() == best["trial"]) & (steps == 0))
    if initial.size == 0:
        return None
    q0 = float(trials[Q_METRIC].iloc[initial[0]])
    word = "above" if best[Q_METRIC] > q0 else "not above"
    noise = noise_note(best[Q_METRIC] - q0, [intervals[best_index], intervals[initial[0]]])
    return (
        f"vs initialisation: Q {best[Q_METRIC]:.4f} is {word} its step-0 Q {q0:.4f} "
        f"(95% {intervals[initial[0]].cell()}): {best[Q_METRIC] - q0:+.4f}{noise}"
    )


def baseline_lines(best: pd.Series, trials: pd.DataFrame, probe: str = "") -> list[str]:
    """The best point's Q and per-task scores against the naive baseline's: its logistic-regression
    table, and the same features under the study's own probe where measured (Q compares within one probe)."""
    tasks = [c.removeprefix(TASK_SCORE_PREFIX) for c in task_score_columns(trials)]
    tasks = [task for task in tasks if task in NAIVE_BASELINE]
    lines = []
    for table, source in [(NAIVE_BASELINE, NAIVE_BASELINE_SOURCE), *same_probe_baseline(probe)]:
        mean = naive_mean(tasks or None, table)
        word = "above" if best[Q_METRIC] > mean else "not above"
        lines.append(f"vs naive baseline ({source}): Q {best[Q_METRIC]:.4f} is {word} its mean {mean:.3f} "
                     f"({best[Q_METRIC] - mean:+.4f})")  # fmt: skip
        if tasks:
            above = [t for t in tasks if float(best[f"score/{t}"]) > table[t]]
            lines.append(
                f"  above it on {len(above)} of {len(tasks)} tasks" + (f": {', '.join(above)}" if above else "")
            )
    return lines


def summary_lines(table: pd.DataFrame, study: StudyFits, info: StudyInfo | None = None) -> list[str]:
    """The verdict, the Q(R) fit, the best configuration and how it compares (plain text lines)."""
    info = info or StudyInfo()
    trials, n_failed = usable_trials(table)
    if trials.empty:
        return [f"No scored trial rows ({n_failed} failed or unscored): nothing to fit."]
    check = check_q_of_r(table, study, info)
    lines = [check.verdict().replace("**", "")] if check is not None else []
    lines.append(fit_line(study))
    trials = checkpoint_rows(trials)  # the best point may be a checkpoint before a trial's last
    i = int(np.nanargmax(trials[Q_METRIC].to_numpy(float)))
    intervals = q_intervals(trials, info)
    best, interval = trials.iloc[i], intervals[i]
    rankme = f", {rankme_axis_label(trials)} {best['rankme']:.2f}" if "rankme" in trials.columns else ""
    lines.append(f"best: {point_names(trials)[i]}: Q {best[Q_METRIC]:.4f} (95% {interval.cell()}){rankme}")
    initial = _initialisation_line(trials, i, intervals)
    lines += ([initial] if initial else []) + baseline_lines(best, trials, info.probe)
    return lines


def mlflow_ui_lines(
    tracking_uri: str, experiment_id: str, bin_dir: str | Path, *, port: int = MLFLOW_UI_PORT
) -> list[str]:
    """A command that works as printed (`mlflow` lives in the venv, not on PATH) and the URL to open."""
    mlflow = Path(bin_dir) / "mlflow"
    return [
        f"open the study in MLflow: {mlflow} ui --backend-store-uri {tracking_uri} --port {port}",
        f"  then browse http://127.0.0.1:{port}/#/experiments/{experiment_id}",
    ]
