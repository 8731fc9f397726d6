"""A study in MLflow: the parent run, its trial children, and the fitted laws logged back.

Child-run convention (what `log_trial_result` writes and `trial_table_from_runs` reads):
- params: trial, model_name, arch, n_params, hours, flops, mask_ratio, configuration
- metrics: `rankme` at each logged training step (pretraining writes it, with params `rankme_n`,
  `rankme_pool`), `eval_rankme` (RankMe of the final checkpoint on the study's RankMe pool) with
  `eval_rankme_n` and tags `eval_rankme_pool`, `eval_rankme_capped` (N < 8 K), `q` (final quality), `q_ci_low` /
  `q_ci_high` (its 95% interval over probe seeds, when there are two or more), `score/<task>`
- optional, written by pretraining when it knows them: param `train_steps` (the planned horizon:
  early prediction compares trials at fractions of it) and param, metric or tag `converged` (true
  when validation loss had stopped falling: Fig. 1b's converged-only Q(R))
- metric `on_q_c_frontier` (1 or 0), written by the study analysis: the trial is on Q(C)'s
  compute-efficiency frontier (paper Sec. IV-E), the points Eq. 6 is fitted to
- tag `audioscale.trial_status`: "ok", "failed" (with `audioscale.trial_error`) or "stopped_early"
  (the RankMe early-stop scheduler stopped it at `audioscale.stopped_at_step`; no Q, not refitted,
  not re-run on resume; its `rankme` history up to the stop is kept)
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from pipeline import tracking
from sweeps.report.figures import study_figures
from sweeps.report.fits import (
    TASK_SCORE_PREFIX,
    StudyFits,
    fit_study_laws,
    usable_trials,
)
from sweeps.report.markdown import (
    fit_table_markdown,
    replay_early_stop,
    study_markdown,
)
from sweeps.report.q_trend import check_q_of_r
from sweeps.report.task_laws import task_law_metrics
from sweeps.study.checkpoint_points import (
    POINTS_COLUMN,
    CheckpointPoint,
    checkpoint_points_of,
    log_checkpoint_points,
)
from sweeps.study.early_stop_rule import DEFAULT_CHECK_FRACTION, DEFAULT_KEEP_FRACTION
from sweeps.study.law_metrics import disagreement_tags, law_metrics

STUDY_EXPERIMENT = "audioscale-studies"
STATUS_TAG = "audioscale.trial_status"
ERROR_TAG = "audioscale.trial_error"
STOPPED_AT_STEP_TAG = "audioscale.stopped_at_step"
Q_TREND_TAG = "audioscale.q_trend"  # on the study run: the Q(R) trend verdict in words
STATUS_OK = "ok"
STATUS_STOPPED_EARLY = "stopped_early"
DONE_STATUSES = (STATUS_OK, STATUS_STOPPED_EARLY)  # a resumed study does not re-run these
NUMERIC_PARAMS = ("n_params", "hours", "flops", "mask_ratio", "train_steps")
Q_C_FRONTIER_TAG = "audioscale.q_c_frontier"  # on the study run: the trials Eq. 6 is fitted to
ON_FRONTIER_METRIC = "on_q_c_frontier"  # on each trial's run: 1 on Q(C)'s frontier, else 0
CONVERGED_KEY = "converged"
TEXT_PARAMS = ("trial", "model_name", "arch", "configuration")


@dataclass(frozen=True, kw_only=True)
class TrialResult:
    trial: str
    model_name: str
    arch: str
    n_params: int
    hours: float
    flops: float  # training FLOPs, Kaplan's 6 x params x tokens processed
    mask_ratio: float
    rankme: float  # final checkpoint, on the RankMe pool: the R of Q(R)
    rankme_by_step: dict[int, float]  # over training: early prediction
    q: float
    task_scores: dict[str, float] = field(default_factory=dict)
    # 95% interval of Q over probe seeds (pipeline.evaluate.scores.quality_q_interval); NaN with one seed.
    q_ci_low: float = math.nan
    q_ci_high: float = math.nan
    configuration: str | None = None  # bootstrap unit; defaults to the trial name
    rankme_history_logged: bool = False  # pretraining already wrote `rankme` into this run
    # What makes `rankme` comparable (pipeline.pool_rankme.PoolRankMe): N, the pool, N < 8 K.
    rankme_n: int = 0
    rankme_pool: str = ""
    rankme_capped: bool = False
    checkpoint_points: dict[int, CheckpointPoint] = field(default_factory=dict)  # step -> (R, Q) of that checkpoint


def log_trial_result(run: tracking.TrackedRun, result: TrialResult) -> None:
    """Write one finished trial into its child run, following the convention above."""
    run.log_params({
        "trial": result.trial, "model_name": result.model_name, "arch": result.arch,
        "n_params": result.n_params, "hours": result.hours, "flops": result.flops,
        "mask_ratio": result.mask_ratio, "configuration": result.configuration or result.trial,
    })  # fmt: skip
    if not result.rankme_history_logged:
        for step, value in sorted(result.rankme_by_step.items()):
            run.log_metrics({"rankme": value}, step=step)
    final_step = max(result.rankme_by_step, default=0)
    log_checkpoint_points(run, result.checkpoint_points, last_step=final_step)
    scores = {f"{TASK_SCORE_PREFIX}{task}": score for task, score in result.task_scores.items()}
    # One probe seed gives no interval (NaN): log none rather than a NaN metric.
    bounds = {"q_ci_low": result.q_ci_low, "q_ci_high": result.q_ci_high}
    interval = {key: value for key, value in bounds.items() if np.isfinite(value)}
    run.log_metrics({"q": result.q, "eval_rankme": result.rankme, "eval_rankme_n": result.rankme_n, **scores,
                     **interval}, step=final_step)
    run.set_tags({STATUS_TAG: STATUS_OK, "eval_rankme_pool": result.rankme_pool,
                  "eval_rankme_capped": result.rankme_capped})


def mark_trial_failed(run: tracking.TrackedRun, error: str) -> None:
    run.set_tags({STATUS_TAG: "failed", ERROR_TAG: error[:5000]})
    run.finish("FAILED")


def mark_trial_stopped_early(
    run: tracking.TrackedRun,
    *,
    identity: dict[str, Any],
    stopped_at_step: int,
    rankme_by_step: dict[int, float],
) -> None:
    """Record a trial the early-stop scheduler stopped: its identity params, the RankMe it reached
    (steps pretraining did not already log) and the stop step; finished, not failed."""
    run.log_params(identity)
    logged = {int(step) for step, _ in tracking.read_run(run.tracking_uri, run.run_id)["metrics"].get("rankme", [])}
    for step, value in sorted(rankme_by_step.items()):
        if step not in logged and step <= stopped_at_step:
            run.log_metrics({"rankme": value}, step=step)
    run.set_tags({STATUS_TAG: STATUS_STOPPED_EARLY, STOPPED_AT_STEP_TAG: stopped_at_step})
    run.finish("FINISHED")


def trial_table_from_runs(runs: list[dict[str, Any]]) -> pd.DataFrame:
    """The trial table (sweeps.report.fits) from `tracking.read_run` dictionaries of child runs."""
    rows = []
    for run in runs:
        params, metrics, tags = run["params"], run["metrics"], run["tags"]
        row: dict[str, Any] = {name: params.get(name) for name in TEXT_PARAMS}
        row.update({name: _number(params.get(name)) for name in NUMERIC_PARAMS})
        row["rankme_by_step"] = {int(step): value for step, value in metrics.get("rankme", [])}
        row["rankme"] = metrics["eval_rankme"][-1][1] if metrics.get("eval_rankme") else np.nan
        row["q"] = metrics["q"][-1][1] if metrics.get("q") else np.nan
        row.update(_rankme_pool_columns(params, metrics, tags))
        for key in ("q_ci_low", "q_ci_high"):  # absent with one probe seed and in older studies
            row[key] = metrics[key][-1][1] if metrics.get(key) else np.nan
        for key, history in metrics.items():
            if key.startswith(TASK_SCORE_PREFIX):
                row[key] = history[-1][1]
        row["status"] = tags.get(STATUS_TAG, "failed" if run["status"] == "FAILED" else "unfinished")
        row["stopped_at_step"] = float(tags.get(STOPPED_AT_STEP_TAG, np.nan))
        row["run_id"] = run["run_id"]
        row[POINTS_COLUMN] = checkpoint_points_of(metrics)
        converged = _converged_flag(params, metrics, tags)
        if converged is not None:
            row[CONVERGED_KEY] = converged
        rows.append(row)
    table = pd.DataFrame(rows)
    if CONVERGED_KEY in table.columns:  # rows of runs that never said stay unconverged, not NaN
        table[CONVERGED_KEY] = table[CONVERGED_KEY].fillna(False).astype(bool)
    return table


def _number(text: Any) -> float:
    """A logged parameter as a float; NaN when absent or not a number (a None logged as "null")."""
    try:
        return float(text)
    except (TypeError, ValueError):
        return np.nan


def _rankme_pool_columns(params: dict, metrics: dict, tags: dict) -> dict[str, Any]:
    """N, pool and capped flag of the evaluation's R, and the pool and N training measured on."""
    return {
        "rankme_n": metrics["eval_rankme_n"][-1][1] if metrics.get("eval_rankme_n") else np.nan,
        "rankme_pool": tags.get("eval_rankme_pool", ""),
        "rankme_capped": str(tags.get("eval_rankme_capped", "")).lower() == "true",
        # The config logs `rankme_n` as asked (null: the default); the N the pool held is logged
        # once it is known, which MLflow keeps as `resumed_param.rankme_n` (params never change).
        "training_rankme_n": _number(tags.get("resumed_param.rankme_n", params.get("rankme_n"))),
        "training_rankme_pool": params.get("rankme_pool", ""),
    }


def _converged_flag(params: dict, metrics: dict, tags: dict) -> bool | None:
    """The run's `converged` flag from a metric, param or tag; None when it has none."""
    if metrics.get(CONVERGED_KEY):
        return bool(metrics[CONVERGED_KEY][-1][1])
    for source in (params, tags):
        if CONVERGED_KEY in source:
            return str(source[CONVERGED_KEY]).strip().lower() in {"true", "1", "1.0", "yes"}
    return None


def _log_frontier(run: tracking.TrackedRun, table: pd.DataFrame, study: StudyFits) -> dict[str, str]:
    """Mark each usable trial's run on or off Q(C)'s frontier; the study run's tag lists those on it."""
    if study.q_c_frontier is None:
        return {}
    trials, _ = usable_trials(table)
    names = trials["trial"].astype(str) if "trial" in trials.columns else trials.index.astype(str)
    if "run_id" in trials.columns:
        for run_id, on in zip(trials["run_id"], study.q_c_frontier):
            if isinstance(run_id, str) and run_id:
                tracking.attach_run(run.tracking_uri, run_id).log_metrics({ON_FRONTIER_METRIC: float(on)}, step=0)
    on_frontier = [name for name, on in zip(names, study.q_c_frontier) if on]
    return {Q_C_FRONTIER_TAG: ", ".join(on_frontier)[:5000]}


def log_study_analysis(
    run: tracking.TrackedRun,
    study_name: str,
    table: pd.DataFrame,
    *,
    n_bootstrap: int = 200,
    keep_fraction: float = DEFAULT_KEEP_FRACTION,
    check_fraction: float = DEFAULT_CHECK_FRACTION,
    extra_sections: Sequence[str] = (),
) -> tuple[StudyFits, str]:
    """Fit the laws, then log parameters with intervals, the fit table, figures and the report.

    A metric that is NaN or inf is not logged; a tag `<metric>.not_logged` says why. The Q(R)
    trend check goes to `q_trend_detectable` (1 or 0) with its verdict in the `audioscale.q_trend`
    tag; the early-stop replay to `early_stop_replay.*`.
    """
    study = fit_study_laws(table, n_bootstrap=n_bootstrap)
    metrics, reasons = law_metrics(study)
    tags = {f"{key}.not_logged": reason[:5000] for key, reason in reasons.items()}
    trend = check_q_of_r(table, study)
    if trend is not None:
        metrics["q_trend_detectable"] = float(trend.detectable)
        tags[Q_TREND_TAG] = trend.verdict().replace("**", "")[:5000]
    replay = replay_early_stop(table, keep_fraction=keep_fraction, check_fraction=check_fraction)
    if replay is not None:
        metrics["early_stop_replay.steps_saved_fraction"] = replay.steps_saved_fraction
        metrics["early_stop_replay.best_kept"] = float(replay.best_kept)
    task_metrics, task_tags = task_law_metrics(study.task_laws)
    metrics.update(task_metrics)
    tags.update(task_tags)
    tags.update(disagreement_tags(study))
    tags.update(_log_frontier(run, table, study))
    if metrics:
        run.log_metrics(metrics, step=0)
    if tags:
        run.set_tags(tags)
    run.log_dict(
        {"fits": {name: fit.to_dict() for name, fit in study.fits.items()}, "skipped": study.skipped},
        "laws/fits.json",
    )
    tracking.log_text(run, fit_table_markdown(study), "laws/fit_table.md")
    figures = study_figures(table, study)
    for file_name, figure in figures.items():
        tracking.log_figure(run, figure, f"laws/{file_name}")
    report = study_markdown(
        study_name, table, study, list(figures), keep_fraction=keep_fraction, check_fraction=check_fraction
    )
    markdown = "\n\n".join([report, *extra_sections])
    tracking.log_text(run, markdown, "laws/report.md")
    return study, markdown


def refit_study(study_name: str, *, tracking_uri: str | None = None, n_bootstrap: int = 200) -> str:
    """Refit a finished (or interrupted) study from MLflow, log the results, return the report."""
    uri = tracking.resolve_tracking_uri(tracking_uri)
    parent_run_id = tracking.find_run_id(uri, STUDY_EXPERIMENT, study_name)
    if parent_run_id is None:
        raise ValueError(
            f"no study run named {study_name!r} in experiment {STUDY_EXPERIMENT!r} at {uri}; "
            "check --study and --tracking-uri (the MLflow UI lists the study runs)"
        )
    table = trial_table_from_runs(tracking.list_child_runs(uri, parent_run_id))
    if table.empty:
        raise ValueError(f"study {study_name!r} has no trial runs yet; run `python -m sweeps.scaling` first")
    _, markdown = log_study_analysis(
        tracking.attach_run(uri, parent_run_id), study_name, table, n_bootstrap=n_bootstrap
    )
    return markdown
