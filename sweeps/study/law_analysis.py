"""A study's analysis in MLflow: the laws fitted on its record, logged back onto the study run.

What a study's runs hold, and the records that write and read them, are sweeps.record's
(sweeps.record.keys states the child-run convention); this module fits the laws on a
`StudyRecord` (read once: sweeps.record.study.read_study) and logs the results: metrics
`law.<law>.<parameter>`, the Q(R) trend verdict, the early-stop replay, the frontier, the figures
and `laws/report.md`.
"""

from __future__ import annotations

import functools
import re
import sys
from collections.abc import Sequence

import matplotlib.pyplot as plt
import pandas as pd

from pipeline.tracking import runs as tracking
from sweeps.protocol.early_stop_rule import DEFAULT_CHECK_FRACTION, DEFAULT_KEEP_FRACTION
from sweeps.record.keys import (
    BEST_POINT_TAG,
    BEST_Q_METRIC,
    BEST_TRIAL_COLUMN,
    BEST_TRIAL_TAG,
    INCOMPLETE_TAG,
    Q_METRIC,
    Q_TREND_TAG,
    REPORT_DIR,
    RUN_COLOUR_COLUMN,
    RUN_COLOUR_TAG,
    RUN_ID_COLUMN,
)
from sweeps.record.replicates import read_q_replicates
from sweeps.record.study import StudyRecord, StudySettings, read_study
from sweeps.report.checkpoints import checkpoint_rows
from sweeps.report.comparisons import BASELINE_LABELS, Comparisons
from sweeps.report.early_stop_markdown import replay_early_stop
from sweeps.report.external_points import external_points_lines
from sweeps.report.figure_files import figure_files
from sweeps.report.figures import study_figures
from sweeps.report.html import markdown_to_html, png_data_uri
from sweeps.report.markdown import fit_table_markdown, study_markdown
from sweeps.report.q_trend import check_q_of_r
from sweeps.report.run_colours import trial_colours
from sweeps.report.study_fits import StudyFits, fit_study_laws, usable_trials
from sweeps.report.study_info import StudyInfo
from sweeps.report.summary import LOCAL_UI_ROOT, best_point, summary_lines
from sweeps.report.task_laws import task_law_metrics
from sweeps.study.law_metrics import disagreement_tags, law_metrics, log_frontier


def study_info(settings: StudySettings) -> StudyInfo:
    """The report's view of the study's settings (the driver logs them when it opens the study)."""
    return StudyInfo(name=settings.name, grid=settings.grid, probe=settings.probe)


def study_comparisons(study: StudyRecord) -> Comparisons:
    """The study's baselines with their Q replicates, and a cached reader of each trial's replicates."""
    uri = study.run.tracking_uri
    baselines = study.baselines()

    @functools.cache
    def replicates_of(run_id: str) -> dict[int, tuple[float, ...]]:
        return read_q_replicates(uri, run_id)

    return Comparisons(
        baselines=tuple(baselines),
        baseline_replicates={baseline.name: baseline.replicates(uri) for baseline in baselines},
        replicates_of=replicates_of,
    )


def _metrics_and_tags(
    run: tracking.TrackedRun,
    table: pd.DataFrame,
    study: StudyFits,
    info: StudyInfo,
    *,
    keep_fraction: float,
    check_fraction: float,
    external: pd.DataFrame | None = None,
    comparisons: Comparisons | None = None,
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
    tags[tracking.RUN_DESCRIPTION_TAG] = description_markdown(
        [*summary_lines(table, study, info, comparisons), *external_points_lines(external)]
    )
    return metrics, tags


def description_markdown(lines: list[str]) -> str:
    """The lines as the run description's markdown: the UI renders " @300" (a checkpoint's step) as
    a link to a GitHub user, so a point is named "at step 300" there."""
    return "\n\n".join(re.sub(r"(?<=\s)@(\d+)", r"at step \1", line) for line in lines)


def log_study_analysis(
    study: StudyRecord,
    table: pd.DataFrame | None = None,
    *,
    n_bootstrap: int = 200,
    keep_fraction: float = DEFAULT_KEEP_FRACTION,
    check_fraction: float = DEFAULT_CHECK_FRACTION,
    extra_sections: Sequence[str] = (),
    comparisons: Comparisons | None = None,
    fits: StudyFits | None = None,
) -> tuple[StudyFits, str]:
    """Fit the laws (only along axes the study's grid varies), then log parameters with intervals,
    the fit table, figures and the report (`laws/report.md`, its figures beside it in `laws/`).

    `table`: the trial table to fit, by default the study's own; `fits`: its laws when already fitted
    (sweeps.study.fits_beside). A metric that is NaN or inf is not logged; a tag `<metric>.not_logged`
    says why. The Q(R) trend check goes to `q_trend_detectable` (1 or 0) with its verdict in the
    `audioscale.q_trend` tag; the early-stop replay to `early_stop_replay.*`; the summary to the run's
    description. External points (sweeps.record.external_point) are drawn and named, never fitted.
    """
    run, info, external = study.run, study_info(study.settings), study.external_table
    table = study.trial_table if table is None else table
    fits = fits if fits is not None else fit_study_laws(table, n_bootstrap=n_bootstrap, grid=info.grid or None)
    comparisons = comparisons or study_comparisons(study)
    metrics, tags = _metrics_and_tags(
        run, table, fits, info, keep_fraction=keep_fraction, check_fraction=check_fraction, external=external,
        comparisons=comparisons,
    )  # fmt: skip
    if metrics:
        run.log_metrics(metrics, step=0)
    run.set_tags(tags)
    run.log_dict(
        {"fits": {name: fit.to_dict() for name, fit in fits.fits.items()}, "skipped": fits.skipped},
        f"{REPORT_DIR}/fits.json",
    )
    tracking.log_text(run, fit_table_markdown(fits), f"{REPORT_DIR}/fit_table.md")
    baselines = {BASELINE_LABELS.get(b.name, b.name): b.q for b in comparisons.baselines}
    colours = trial_colours(table)
    figures = study_figures(table, fits, info, external=external, baselines=baselines, colours=colours)
    files = _log_figure_files(run, study.name, figures, info)
    _pin_trial_colours(run.tracking_uri, table, colours)
    _mark_best_trial(run, table)
    # MLflow's markdown viewer loads an image only from an absolute URL: the UI's get-artifact route
    # at the address the study prints (a tracking server's own, or `mlflow ui`'s default). The HTML
    # report carries its figures inside the file and shows them wherever the UI runs.
    ui_root = run.tracking_uri if run.tracking_uri.startswith(("http://", "https://")) else LOCAL_UI_ROOT
    sources = {name: f"{ui_root.rstrip('/')}/{tracking.artifact_download_path(run, f'{REPORT_DIR}/{name}')}"
               for name in figures}  # fmt: skip
    inline = {name: png_data_uri(files[name]) for name in figures}
    reports = {}
    for kind, figure_sources in (("md", sources), ("html", inline)):
        report = study_markdown(
            study.name, table, fits, list(figures), keep_fraction=keep_fraction, check_fraction=check_fraction,
            info=info, figure_sources=figure_sources,
        )  # fmt: skip
        reports[kind] = "\n\n".join([report, *external_points_lines(external), *extra_sections])
    tracking.log_text(run, reports["md"], f"{REPORT_DIR}/report.md")
    title = f"Scaling study {study.name}"
    tracking.log_text(run, markdown_to_html(reports["html"], title=title), f"{REPORT_DIR}/report.html")
    return fits, reports["md"]


def _log_figure_files(run: tracking.TrackedRun, study_name: str, figures: dict, info: StudyInfo) -> dict[str, bytes]:
    """Each figure as a PNG for screens and a PDF for print (the study named in their metadata),
    logged under `laws/`; returns {file name: bytes}. Each figure is closed once written: pyplot holds
    every figure it made until then, so a process that fits many studies (a notebook, the suite)
    would otherwise keep them all in memory."""
    files: dict[str, bytes] = {}
    for file_name, figure in figures.items():
        files |= figure_files(file_name, figure, title=f"{study_name}: {file_name}", description=info.description())
        plt.close(figure)
    for file_name, data in files.items():
        tracking.log_bytes(run, data, f"{REPORT_DIR}/{file_name}")
    return files


def _mark_best_trial(run: tracking.TrackedRun, table: pd.DataFrame) -> None:
    """The best point on the study run (tag and `best_q`), `audioscale.best` on its trial's run only."""
    best = best_point(table)
    if best is None or RUN_ID_COLUMN not in table.columns:
        return
    trial, point = best
    points = checkpoint_rows(usable_trials(table)[0])
    run.set_tags({BEST_POINT_TAG: point})
    run.log_metrics({BEST_Q_METRIC: float(points[Q_METRIC].max())}, step=0)
    # Only the runs whose mark changes are written to: the table read their tags already.
    marked = table[BEST_TRIAL_COLUMN] if BEST_TRIAL_COLUMN in table.columns else pd.Series(None, index=table.index)
    for name, run_id, has_mark in zip(table["trial"].astype(str), table[RUN_ID_COLUMN], marked):
        if not (isinstance(run_id, str) and run_id) or (has_mark is not None and bool(has_mark) == (name == trial)):
            continue
        child = tracking.attach_run(run.tracking_uri, run_id)
        if name == trial:
            child.set_tags({BEST_TRIAL_TAG: "true"})
        else:
            child.delete_tag(BEST_TRIAL_TAG)


def _pin_trial_colours(tracking_uri: str, table: pd.DataFrame, colours: dict[str, str]) -> None:
    """Each trial run's `mlflow.runColor` set to its figures' colour, so the UI's charts draw every
    trial as the figures do (sweeps.report.run_colours says why the UI's own pick is not enough)."""
    if not {"trial", RUN_ID_COLUMN} <= set(table.columns):
        return
    pinned = table[RUN_COLOUR_COLUMN] if RUN_COLOUR_COLUMN in table.columns else pd.Series("", index=table.index)
    for name, run_id, current in zip(table["trial"].astype(str), table[RUN_ID_COLUMN], pinned):
        colour = colours.get(name)
        if colour and isinstance(run_id, str) and run_id and current != colour:
            tracking.attach_run(tracking_uri, run_id).set_tags({RUN_COLOUR_TAG: colour})


def refit_study(study_name: str, *, tracking_uri: str | None = None, n_bootstrap: int = 200) -> str:
    """Refit a finished (or interrupted) study from MLflow, log the results, return the report."""
    # A server that is not there: one line in seconds, not MLflow's minutes of retries.
    study = read_study(tracking.checked_store(tracking_uri), study_name)
    if study.trial_table.empty:
        raise ValueError(f"study {study_name!r} has no trial runs yet; run `python -m sweeps.scaling` first")
    incomplete = study.incompleteness()
    if incomplete:  # said before the fits, recorded on the run and at the report's end
        print(f"sweeps.laws: warning: {incomplete}", file=sys.stderr)
        study.run.set_tags({INCOMPLETE_TAG: incomplete[:4000]})
    _, markdown = log_study_analysis(
        study, n_bootstrap=n_bootstrap, extra_sections=[f"## Incomplete study\n\n{incomplete}"] if incomplete else ()
    )
    return markdown
