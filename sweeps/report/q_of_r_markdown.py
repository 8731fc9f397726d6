"""The report's headline section: is there a Q(R) trend to fit, then each point's R and Q with its
interval when that interval can inform (sweeps.report.intervals)."""

from __future__ import annotations

import pandas as pd

from sweeps.record.keys import Q_METRIC
from sweeps.report.checkpoints import checkpoint_rows
from sweeps.report.intervals import q_intervals
from sweeps.report.q_trend import check_q_of_r
from sweeps.report.study_fits import StudyFits, usable_trials
from sweeps.report.study_info import StudyInfo, rankme_axis_label


def point_names(trials: pd.DataFrame) -> list[str]:
    """Each row's trial name, with its checkpoint step when rows are checkpoints of a trial."""
    names = trials["trial"].astype(str) if "trial" in trials.columns else trials.index.astype(str)
    if "step" not in trials.columns:
        return list(names)
    return [name if pd.isna(step) else f"{name} @{int(step)}" for name, step in zip(names, trials["step"])]


def q_of_r_section(table: pd.DataFrame, study: StudyFits, info: StudyInfo | None = None) -> list[str]:
    """The headline law first: is there a trend to fit at all, then each point's R and Q."""
    info = info or StudyInfo()
    check = check_q_of_r(table, study, info)
    if check is None:
        return []
    trials = checkpoint_rows(usable_trials(table)[0])  # every evaluated checkpoint: the fit's points
    lines = ["", "## Q(R): quality against RankMe", "", check.verdict(), ""]
    if "Q(R)" in study.skipped:
        lines += [f"Q(R) not fitted: {study.skipped['Q(R)']}.", ""]
    lines += [f"| trial | {rankme_axis_label(trials)} | Q | Q 95% interval |", "|---|---|---|---|"]
    for name, rankme, q, interval in zip(
        point_names(trials), trials["rankme"], trials[Q_METRIC], q_intervals(trials, info)
    ):
        lines.append(f"| {name} | {rankme:.2f} | {q:.4f} | {interval.cell()} |")
    return lines
