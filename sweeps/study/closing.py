"""The closing lines of `python -m sweeps.scaling`: what ran, the study's summary (Q(R) with
intervals, R², verdict, best configuration against its initialisation and the measured baselines) and a
command that opens it in MLflow as printed, with the URL."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pipeline.tracking import runs as tracking
from sweeps.record.keys import STUDY_EXPERIMENT
from sweeps.record.study import read_study_settings
from sweeps.record.view import write_study_view
from sweeps.report.summary import mlflow_ui_lines, summary_lines
from sweeps.study.grids import parse_grid_names
from sweeps.study.law_analysis import study_info


def closing_lines(outcome: Any, *, tracking_uri: str, bin_dir: str | Path) -> list[str]:
    """`outcome`: the driver's StudyOutcome; `bin_dir`: where this Python's `mlflow` lives (the venv's bin)."""
    info = study_info(read_study_settings(tracking_uri, outcome.parent_run_id, outcome.study_name))
    lines = [
        "",
        f"== study {outcome.study_name} (grid {info.grid or '?'}, probe {info.probe or '?'}) ==",
        f"trials run: {len(outcome.trials_run)}, skipped (finished earlier): {len(outcome.trials_skipped)}, "
        f"failed: {', '.join(outcome.trials_failed) or 'none'}",
    ]
    if outcome.early_stop is not None:
        summary = outcome.early_stop
        lines.append(
            f"RankMe early stopping: {len(summary.stopped_at_step)} trial(s) stopped, "
            f"{100 * summary.steps_saved_fraction:.0f}% of planned steps saved; best configuration "
            f"changed: {'yes' if summary.best_changed else 'no'} (best finished: {summary.best_finished})"
        )
    lines += summary_lines(outcome.table, outcome.fits, info, outcome.comparisons)
    experiment_id = tracking.get_or_create_experiment(tracking_uri, STUDY_EXPERIMENT)
    key = write_study_view(
        tracking_uri,
        experiment_id,
        study_name=outcome.study_name,
        study_run_id=outcome.parent_run_id,
        grid_names=parse_grid_names(info.grid) if info.grid else [],
    )
    return lines + mlflow_ui_lines(
        tracking_uri, experiment_id, bin_dir, view_key=key, study_run_id=outcome.parent_run_id
    )
