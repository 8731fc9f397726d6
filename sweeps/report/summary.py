"""The study in a few lines: the Q(R) fit with intervals and R², the trend verdict, the best
configuration against its initialisation and the naive baseline. The study run's MLflow description
and the closing lines of `python -m sweeps.scaling` are these lines."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from sweeps.report.checkpoints import checkpoint_rows
from sweeps.report.fits import StudyFits, task_score_columns, usable_trials
from sweeps.report.intervals import q_intervals
from sweeps.report.naive_baseline import (
    NAIVE_BASELINE,
    NAIVE_BASELINE_SOURCE,
    naive_mean,
)
from sweeps.report.q_of_r_markdown import point_names
from sweeps.report.q_trend import check_q_of_r
from sweeps.report.study_info import StudyInfo, rankme_axis_label

MLFLOW_UI_PORT = 5000


def fit_line(study: StudyFits) -> str:
    """'Q(R) fit: q_inf 0.61 (95% 0.60-0.63), ...; R² 0.912 over 20 points', or why there is none."""
    fit = study.fits.get("Q(R)")
    if fit is None:
        return f"Q(R) not fitted: {study.skipped.get('Q(R)', 'no RankMe')}"
    params = ", ".join(
        f"{key} {value:.4g}" + (f" (95% {fit.ci[key][0]:.4g}-{fit.ci[key][1]:.4g})" if key in fit.ci else "")
        for key, value in fit.params.items()
    )
    r2 = f"{fit.r2:.3f}" if np.isfinite(fit.r2) else "undefined"
    return f"Q(R) fit: {params}; R² {r2} over {fit.n_points} points"


def _initialisation_line(trials: pd.DataFrame, best: pd.Series) -> str | None:
    """The best point's Q against its own trial's step-0 checkpoint, when rows are checkpoints."""
    if "step" not in trials.columns or "trial" not in trials.columns:
        return None
    initial = trials[(trials["trial"] == best["trial"]) & (pd.to_numeric(trials["step"], errors="coerce") == 0)]
    if initial.empty:
        return None
    q0 = float(initial["q"].iloc[0])
    word = "above" if best["q"] > q0 else "not above"
    return f"vs initialisation: Q {best['q']:.4f} is {word} its step-0 Q {q0:.4f} ({best['q'] - q0:+.4f})"


def baseline_lines(best: pd.Series, trials: pd.DataFrame) -> list[str]:
    """The best point's Q and per-task scores against the naive baseline's."""
    tasks = [c.removeprefix("score/") for c in task_score_columns(trials) if c.removeprefix("score/") in NAIVE_BASELINE]
    mean = naive_mean(tasks or None)
    word = "above" if best["q"] > mean else "not above"
    lines = [f"vs naive baseline ({NAIVE_BASELINE_SOURCE}): Q {best['q']:.4f} is {word} its mean {mean:.3f} "
             f"({best['q'] - mean:+.4f})"]  # fmt: skip
    if tasks:
        above = [t for t in tasks if float(best[f"score/{t}"]) > NAIVE_BASELINE[t]]
        lines.append(f"  above naive on {len(above)} of {len(tasks)} tasks" + (f": {', '.join(above)}" if above else ""))
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
    i = int(np.nanargmax(trials["q"].to_numpy(float)))
    best, interval = trials.iloc[i], q_intervals(trials, info)[i]
    rankme = f", {rankme_axis_label(trials)} {best['rankme']:.2f}" if "rankme" in trials.columns else ""
    lines.append(f"best: {point_names(trials)[i]}: Q {best['q']:.4f} (95% {interval.cell()}){rankme}")
    initial = _initialisation_line(trials, best)
    lines += ([initial] if initial else []) + baseline_lines(best, trials)
    return lines


def mlflow_ui_lines(tracking_uri: str, experiment_id: str, bin_dir: str | Path, *, port: int = MLFLOW_UI_PORT) -> list[str]:
    """A command that works as printed (`mlflow` lives in the venv, not on PATH) and the URL to open."""
    mlflow = Path(bin_dir) / "mlflow"
    return [
        f"open the study in MLflow: {mlflow} ui --backend-store-uri {tracking_uri} --port {port}",
        f"  then browse http://127.0.0.1:{port}/#/experiments/{experiment_id}",
    ]
