"""A study in MLflow: the parent run, its trial children, and the fitted laws logged back.

Child-run convention (what `log_trial_result` writes and `trial_table_from_runs` reads):
- params: trial, model_name, arch, n_params, hours, flops, mask_ratio, configuration, `grid.<grid>`
  (the trial's coordinate on each grid of the study), `probe_seeds` (when known), `scale` (an
  architecture grid point's Table V column, "base" or "large", when it has one)
- metrics, one name per quantity: `rankme` is RankMe on the study's RankMe pool
  (pipeline.rankme.model_rankme), at each logged training step (pretraining writes it, with params
  `rankme_n`, `rankme_pool`) and at the scored checkpoint's step (the R of Q(R)), with
  `eval_rankme_n` and tags `eval_rankme_pool`, `eval_rankme_capped` (N < 8 K); `task_rankme` the
  evaluation's diagnostic on task audio (never R); `q` (quality), `q_ci_low` / `q_ci_high` (its 95%
  interval over probe seeds, when there are two or more), `score/<task>`. Studies logged before
  this convention have the checkpoint's R as `eval_rankme`; it is read as R.
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

from pipeline.tracking import runs as tracking
from sweeps.protocol.early_stop_rule import DEFAULT_CHECK_FRACTION, DEFAULT_KEEP_FRACTION
from sweeps.report.early_stop_markdown import replay_early_stop
from sweeps.report.external_points import external_points_lines
from sweeps.report.figures import study_figures
from sweeps.report.fits import TASK_SCORE_PREFIX, StudyFits, fit_study_laws
from sweeps.report.markdown import fit_table_markdown, study_markdown
from sweeps.report.q_trend import check_q_of_r
from sweeps.report.study_info import StudyInfo
from sweeps.report.summary import summary_lines
from sweeps.report.task_laws import task_law_metrics
from sweeps.study.checkpoint_points import (
    POINTS_COLUMN,
    CheckpointPoint,
    checkpoint_points_of,
    log_checkpoint_points,
)
from sweeps.study.external_points import external_points_table, trial_runs
from sweeps.study.law_metrics import ON_FRONTIER_METRIC as ON_FRONTIER_METRIC
from sweeps.study.law_metrics import Q_C_FRONTIER_TAG as Q_C_FRONTIER_TAG
from sweeps.study.law_metrics import disagreement_tags, law_metrics, log_frontier
from sweeps.study.law_metrics import metric_key as metric_key
from sweeps.study.run_columns import (
    CONVERGED_KEY,
    converged_flag,
    evaluated_rankme,
    number,
    rankme_pool_columns,
)

STUDY_EXPERIMENT = "audioscale-studies"
STATUS_TAG = "audioscale.trial_status"
ERROR_TAG = "audioscale.trial_error"
STOPPED_AT_STEP_TAG = "audioscale.stopped_at_step"
Q_TREND_TAG = "audioscale.q_trend"  # on the study run: the Q(R) trend verdict in words
STATUS_OK = "ok"
STATUS_STOPPED_EARLY = "stopped_early"
DONE_STATUSES = (STATUS_OK, STATUS_STOPPED_EARLY)  # a resumed study does not re-run these
NUMERIC_PARAMS = ("n_params", "hours", "flops", "mask_ratio", "train_steps")
TEXT_PARAMS = ("trial", "model_name", "arch", "configuration", "q_interval_over", "scale")
# What a trial's Q interval resamples (sweeps.report.intervals judges each kind by its own rule).
Q_INTERVAL_OVER_SEEDS = "probe seeds"
Q_INTERVAL_OVER_TEST_CLIPS = "test clips"  # the deterministic probes: a bootstrap over test clips
GRID_PARAM_PREFIX = "grid."
REPORT_DIR = "laws"  # the study run's artifact folder: report.md and its figures side by side


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
    # 95% interval of Q (sweeps.study.trial.q_interval): over probe seeds, or over test clips for the
    # deterministic probes (`q_interval_over` says which); NaN where neither exists.
    q_ci_low: float = math.nan
    q_ci_high: float = math.nan
    q_interval_over: str = ""
    configuration: str | None = None  # bootstrap unit; defaults to the trial name
    rankme_history_logged: bool = False  # pretraining already wrote `rankme` into this run
    # What makes `rankme` comparable (pipeline.rankme.model_rankme.PoolRankMe): N, the pool, N < 8 K.
    rankme_n: int = 0
    rankme_pool: str = ""
    rankme_capped: bool = False
    # The evaluation's diagnostic RankMe on task audio (never R); NaN: not measured.
    task_rankme: float = math.nan
    probe_seeds: int = 0  # probe seeds behind q_ci_low/high (sweeps.report.intervals); 0: unknown
    coordinates: dict[str, Any] = field(default_factory=dict)  # grid name -> this trial's value on it
    checkpoint_points: dict[int, CheckpointPoint] = field(default_factory=dict)  # step -> (R, Q) of that checkpoint
    scale: str | None = None  # Table V's column ("base" / "large") of an architecture grid point


def log_trial_result(run: tracking.TrackedRun, result: TrialResult) -> None:
    """Write one finished trial into its child run, following the convention above."""
    run.log_params({
        "trial": result.trial, "model_name": result.model_name, "arch": result.arch,
        "n_params": result.n_params, "hours": result.hours, "flops": result.flops,
        "mask_ratio": result.mask_ratio, "configuration": result.configuration or result.trial,
        # The grid coordinate first in the UI's sorted params: `grid.mask_ratio` 0.7, `grid.size` w32d2.
        **{f"{GRID_PARAM_PREFIX}{name}": value for name, value in result.coordinates.items()},
        **({"probe_seeds": result.probe_seeds} if result.probe_seeds > 0 else {}),
        **({"q_interval_over": result.q_interval_over} if result.q_interval_over else {}),
        **({"scale": result.scale} if result.scale else {}),
    })  # fmt: skip
    if not result.rankme_history_logged:
        for step, value in sorted(result.rankme_by_step.items()):
            run.log_metrics({"rankme": value}, step=step)
    final_step = max(result.rankme_by_step, default=0)
    log_checkpoint_points(
        run, result.checkpoint_points, last_step=final_step, rankme_logged_at=set(result.rankme_by_step)
    )
    scores = {f"{TASK_SCORE_PREFIX}{task}": score for task, score in result.task_scores.items()}
    # One probe seed gives no interval (NaN): log none rather than a NaN metric.
    bounds = {"q_ci_low": result.q_ci_low, "q_ci_high": result.q_ci_high}
    interval = {key: value for key, value in bounds.items() if np.isfinite(value)}
    # `rankme` is one quantity (pool RankMe): training's history and the evaluated checkpoint's R.
    diagnostic = {"task_rankme": result.task_rankme} if np.isfinite(result.task_rankme) else {}
    run.log_metrics(
        {"q": result.q, "rankme": result.rankme, "eval_rankme_n": result.rankme_n, **scores, **interval, **diagnostic},
        step=final_step,
    )
    run.set_tags(
        {STATUS_TAG: STATUS_OK, "eval_rankme_pool": result.rankme_pool, "eval_rankme_capped": result.rankme_capped}
    )


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
    """The trial table (sweeps.report.fits) from `tracking.read_run` dictionaries of child runs;
    external points (sweeps.study.external_points) are not trials and are left out."""
    rows = []
    for run in trial_runs(runs):
        params, metrics, tags = run["params"], run["metrics"], run["tags"]
        row: dict[str, Any] = {name: params.get(name) for name in TEXT_PARAMS}
        row.update({name: number(params.get(name)) for name in NUMERIC_PARAMS})
        row["rankme_by_step"] = {int(step): value for step, value in metrics.get("rankme", [])}
        row["rankme"] = evaluated_rankme(metrics)
        row["probe_seeds"] = number(params.get("probe_seeds"))
        if metrics.get("task_rankme"):
            row["task_rankme"] = metrics["task_rankme"][-1][1]
        row["q"] = metrics["q"][-1][1] if metrics.get("q") else np.nan
        row.update(rankme_pool_columns(params, metrics, tags))
        for key in ("q_ci_low", "q_ci_high"):  # absent with one probe seed and in older studies
            row[key] = metrics[key][-1][1] if metrics.get(key) else np.nan
        for key, history in metrics.items():
            if key.startswith(TASK_SCORE_PREFIX):
                row[key] = history[-1][1]
        row["status"] = tags.get(STATUS_TAG, "failed" if run["status"] == "FAILED" else "unfinished")
        row["stopped_at_step"] = float(tags.get(STOPPED_AT_STEP_TAG, np.nan))
        row["run_id"] = run["run_id"]
        row[POINTS_COLUMN] = checkpoint_points_of(metrics)
        converged = converged_flag(params, metrics, tags)
        if converged is not None:
            row[CONVERGED_KEY] = converged
        rows.append(row)
    table = pd.DataFrame(rows)
    if CONVERGED_KEY in table.columns:  # rows of runs that never said stay unconverged, not NaN
        table[CONVERGED_KEY] = table[CONVERGED_KEY].fillna(False).astype(bool)
    return table


def study_info(run: tracking.TrackedRun, study_name: str) -> StudyInfo:
    """The study's grid and probe, from its run's params (the driver logs them when it opens the study)."""
    params = tracking.read_run(run.tracking_uri, run.run_id)["params"]
    return StudyInfo(name=study_name, grid=params.get("grid", ""), probe=params.get("probe", ""))


def _metrics_and_tags(
    run: tracking.TrackedRun,
    table: pd.DataFrame,
    study: StudyFits,
    info: StudyInfo,
    *,
    keep_fraction: float,
    check_fraction: float,
    external: pd.DataFrame | None = None,
) -> tuple[dict[str, float], dict[str, str]]:
    """The study run's metrics and tags: laws, trend verdict, early-stop replay, task laws, frontier."""
    metrics, reasons = law_metrics(study)
    tags = {f"{key}.not_logged": reason[:5000] for key, reason in reasons.items()}
    trend = check_q_of_r(table, study, info)
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
    tags.update(log_frontier(run, table, study))
    # The run's description in the UI: the summary, so the study reads without opening artifacts.
    tags[tracking.RUN_DESCRIPTION_TAG] = "\n\n".join(
        [*summary_lines(table, study, info), *external_points_lines(external)]
    )
    return metrics, tags


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
    """Fit the laws (only along axes the study's grid varies), then log parameters with intervals,
    the fit table, figures and the report (`laws/report.md`, its figures beside it in `laws/`).

    A metric that is NaN or inf is not logged; a tag `<metric>.not_logged` says why. The Q(R)
    trend check goes to `q_trend_detectable` (1 or 0) with its verdict in the `audioscale.q_trend`
    tag; the early-stop replay to `early_stop_replay.*`; the summary to the run's description.
    The study's external points (sweeps.study.external_points) are drawn on the Q(R) figure and
    named in the summary and report, never fitted.
    """
    info = study_info(run, study_name)
    external = external_points_table(tracking.list_child_runs(run.tracking_uri, run.run_id))
    study = fit_study_laws(table, n_bootstrap=n_bootstrap, grid=info.grid or None)
    metrics, tags = _metrics_and_tags(
        run, table, study, info, keep_fraction=keep_fraction, check_fraction=check_fraction, external=external
    )
    if metrics:
        run.log_metrics(metrics, step=0)
    run.set_tags(tags)
    run.log_dict(
        {"fits": {name: fit.to_dict() for name, fit in study.fits.items()}, "skipped": study.skipped},
        "laws/fits.json",
    )
    tracking.log_text(run, fit_table_markdown(study), "laws/fit_table.md")
    figures = study_figures(table, study, info, external=external)
    for file_name, figure in figures.items():
        tracking.log_figure(run, figure, f"{REPORT_DIR}/{file_name}")
    # The UI's pages live at its root; an image loads from its get-artifact route (a path relative to
    # report.md would resolve against the UI page, not the artifact folder).
    sources = {name: tracking.artifact_download_path(run, f"{REPORT_DIR}/{name}") for name in figures}
    report = study_markdown(
        study_name, table, study, list(figures), keep_fraction=keep_fraction, check_fraction=check_fraction,
        info=info, figure_sources=sources,
    )  # fmt: skip
    markdown = "\n\n".join([report, *external_points_lines(external), *extra_sections])
    tracking.log_text(run, markdown, f"{REPORT_DIR}/report.md")
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
