"""The study in a few lines: the Q(R) fit with intervals and R², the trend verdict, the best
configuration against its initialisation and the study's measured baselines. The study run's MLflow description
and the closing lines of `python -m sweeps.scaling` are these lines."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from sweeps.record.keys import Q_METRIC, REPORT_DIR, TASK_SCORE_PREFIX
from sweeps.record.view import run_page_url, study_view_url
from sweeps.report.checkpoints import checkpoint_rows
from sweeps.report.comparisons import Comparisons, baseline_lines, gain_interval, initialisation_lines
from sweeps.report.intervals import Z_95, IntervalVerdict, q_intervals
from sweeps.report.q_of_r_markdown import point_names
from sweeps.report.q_trend import check_q_of_r
from sweeps.report.study_fits import StudyFits, task_score_columns, usable_trials
from sweeps.report.study_info import StudyInfo, rankme_axis_label
from sweeps.report.task_laws import NO_CEILING, q_inf_pinned_at_one, q_inf_reaches_one

MLFLOW_UI_PORT = 5000
LOCAL_UI_ROOT = f"http://127.0.0.1:{MLFLOW_UI_PORT}"  # where the printed `mlflow ui` command serves


def _ci_text(fit, key: str) -> str:
    if key not in fit.ci:
        return ""
    low, high = fit.ci[key]
    if q_inf_pinned_at_one(fit, key):
        return f" ({NO_CEILING})"
    if key == "q_inf" and q_inf_reaches_one(fit):
        return f" (95% {low:.4g} to the bound 1: no ceiling established)"
    return f" (95% {low:.4g}-{high:.4g})"


def fit_line(study: StudyFits, *, informative: bool = True) -> str:
    """'Q(R) fit: q_inf 0.61 (95% 0.60-0.63), ...; R² 0.912 over 20 points', or why there is none.
    Without a detectable trend (`informative` False) the parameters and their intervals describe
    noise and are not shown as results (the report's table keeps them)."""
    fit = study.fits.get("Q(R)")
    if fit is None:
        return f"Q(R) not fitted: {study.skipped.get('Q(R)', 'no RankMe')}"
    r2 = f"{fit.r2:.3f}" if np.isfinite(fit.r2) else "undefined"
    if not informative:
        return f"Q(R) fit: not informative (no detectable trend, above); R² {r2} over {fit.n_points} points"
    params = ", ".join(f"{key} {value:.4g}{_ci_text(fit, key)}" for key, value in fit.params.items())
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


def _initial_row(trials: pd.DataFrame, best_index: int) -> int | None:
    """The row of the best point's own trial at step 0, when rows are checkpoints."""
    if "step" not in trials.columns or "trial" not in trials.columns:
        return None
    steps = pd.to_numeric(trials["step"], errors="coerce").to_numpy()
    initial = np.flatnonzero((trials["trial"].to_numpy() == trials.iloc[best_index]["trial"]) & (steps == 0))
    return int(initial[0]) if initial.size else None


def _initialisation_lines(
    trials: pd.DataFrame, best_index: int, intervals: list[IntervalVerdict], comparisons: Comparisons
) -> list[str]:
    """The best point against its trial's step 0: paired where replicates were logged, else the
    unpaired comparison of the two intervals."""
    initial = _initial_row(trials, best_index)
    if initial is None:
        return []
    best, start = trials.iloc[best_index], trials.iloc[initial]
    lines = initialisation_lines(best, start, comparisons)
    if gain_interval(best, comparisons) is not None:
        return lines
    difference = float(best[Q_METRIC] - start[Q_METRIC])
    noise = noise_note(difference, [intervals[best_index], intervals[initial]])
    word = "above" if difference > 0 else "not above"
    return [
        f"vs initialisation: Q {best[Q_METRIC]:.4f} is {word} its step-0 Q {start[Q_METRIC]:.4f} "
        f"(95% {intervals[initial].cell()}): {difference:+.4f}{noise}",
        *lines[1:],
    ]


def _best_row(points: pd.DataFrame) -> int:
    """The checkpoint row with the highest Q (the first of equals)."""
    return int(np.nanargmax(points[Q_METRIC].to_numpy(float)))


def best_point(table: pd.DataFrame) -> tuple[str, str] | None:
    """(trial, point name) of the study's best point, the one the summary's "best:" line names, e.g.
    ("mask0.50", "mask0.50 @43"); None without a scored trial."""
    trials, _ = usable_trials(table)
    if trials.empty or "trial" not in trials.columns:
        return None
    points = checkpoint_rows(trials)
    i = _best_row(points)
    return str(points.iloc[i]["trial"]), point_names(points)[i]


def summary_lines(
    table: pd.DataFrame, study: StudyFits, info: StudyInfo | None = None, comparisons: Comparisons | None = None
) -> list[str]:
    """The verdict, the Q(R) fit, the best configuration and how it compares with its initialisation
    and the study's baselines (plain text lines)."""
    info, comparisons = info or StudyInfo(), comparisons or Comparisons()
    trials, n_failed = usable_trials(table)
    if trials.empty:
        return [f"No scored trial rows ({n_failed} failed or unscored): nothing to fit."]
    check = check_q_of_r(table, study, info)
    lines = [check.verdict().replace("**", "")] if check is not None else []
    lines.append(fit_line(study, informative=check is None or check.detectable))
    trials = checkpoint_rows(trials)  # the best point may be a checkpoint before a trial's last
    i = _best_row(trials)
    intervals = q_intervals(trials, info)
    best, interval = trials.iloc[i], intervals[i]
    rankme = f", {rankme_axis_label(trials)} {best['rankme']:.2f}" if "rankme" in trials.columns else ""
    # The winner's curse: the best point is chosen for its Q, so with more than one point its Q (and
    # its lead over the baselines below) reads high by the noise that made it the largest.
    picked = f"; the largest Q of {len(trials)} points, so it reads high by selection" if len(trials) > 1 else ""
    lines.append(f"best: {point_names(trials)[i]}: Q {best[Q_METRIC]:.4f} (95% {interval.cell()}){rankme}{picked}")
    lines += _initialisation_lines(trials, i, intervals, comparisons)
    tasks = [c.removeprefix(TASK_SCORE_PREFIX) for c in task_score_columns(trials)]
    return lines + baseline_lines(best, tasks, comparisons)


def mlflow_ui_lines(
    tracking_uri: str,
    experiment_id: str,
    bin_dir: str | Path,
    *,
    view_key: str | None = None,
    study_run_id: str | None = None,
    port: int = MLFLOW_UI_PORT,
) -> list[str]:
    """A command that works as printed (`mlflow` lives in the checkout's .venv, not on PATH), the URL
    of the study's runs table (sweeps.record.view) and, given the study's view and run, the URLs of
    its chart view, its run and its report, all in the UI's model-training layout; a tracking server
    serves the UI itself."""

    def url(root: str) -> str:
        if view_key is None:
            return f"{root.rstrip('/')}/#/experiments/{experiment_id}"
        return study_view_url(root, experiment_id, view_key)

    def more(root: str) -> list[str]:
        if view_key is None or study_run_id is None:
            return []
        return [
            f"  charts (Q over steps, Q against RankMe): {study_view_url(root, experiment_id, view_key, charts=True)}",
            f"  the study run: {run_page_url(root, experiment_id, study_run_id)}",
            f"  the report: {run_page_url(root, experiment_id, study_run_id, f'{REPORT_DIR}/report.html')}",
        ]

    if tracking_uri.startswith(("http://", "https://")):
        return [f"open the study in MLflow: {url(tracking_uri)}", *more(tracking_uri)]
    mlflow = Path(bin_dir) / "mlflow"
    root = f"http://127.0.0.1:{port}"
    return [
        f"open the study in MLflow: {mlflow} ui --backend-store-uri {tracking_uri} --port {port}",
        f"  then browse {url(root)}",
        *more(root),
    ]
