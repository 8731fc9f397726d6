"""The report's early-stop section: the RankMe early-stop rule replayed on a study's finished trials,
at its decision step and at every logged step (sweeps.protocol.early_stop_rule is the rule)."""

from __future__ import annotations

import pandas as pd

from sweeps.protocol.early_stop_rule import (
    DEFAULT_CHECK_FRACTION,
    DEFAULT_KEEP_FRACTION,
    DecisionReplay,
    replay_decision_point,
)
from sweeps.record.keys import Q_METRIC
from sweeps.report.early_prediction import simulate_rankme_early_stop
from sweeps.report.study_fits import usable_trials


def row_names(trials: pd.DataFrame) -> list[str]:
    """Trial names, made unique per row (seeds of one configuration share a name)."""
    names = [str(n) for n in (trials["trial"] if "trial" in trials.columns else trials.index)]
    repeated = {n for n in names if names.count(n) > 1}
    return [f"{n} (row {i})" if n in repeated else n for i, n in enumerate(names)]


def replay_early_stop(
    table: pd.DataFrame, *, keep_fraction: float = DEFAULT_KEEP_FRACTION, check_fraction: float = DEFAULT_CHECK_FRACTION
) -> DecisionReplay | None:
    """The early-stop rule replayed at its decision step on the study's finished trials."""
    trials, _ = usable_trials(table)
    if "rankme_by_step" not in trials.columns:
        return None
    names = row_names(trials)
    histories = {n: {int(s): float(r) for s, r in dict(h).items()} for n, h in zip(names, trials["rankme_by_step"])}
    return replay_decision_point(
        histories,
        dict(zip(names, trials[Q_METRIC])),
        {n: max(h, default=0) for n, h in histories.items()},
        keep_fraction=keep_fraction,
        check_fraction=check_fraction,
    )


def early_stop_section(table: pd.DataFrame, *, keep_fraction: float, check_fraction: float) -> list[str]:
    """The early-stop rule replayed on the finished trials: at its decision step, then at every step."""
    trials, _ = usable_trials(table)
    replay = replay_early_stop(table, keep_fraction=keep_fraction, check_fraction=check_fraction)
    stops = simulate_rankme_early_stop(
        trials["rankme_by_step"], trials[Q_METRIC], row_names(trials), keep_fraction=keep_fraction
    )
    if replay is None and not len(stops):
        return []
    lines = ["", "## RankMe early stopping, replayed on the finished trials", ""]
    if replay is None:
        lines += ["Fewer than two trials have a RankMe at the decision step: nothing to replay there.", ""]
    else:
        lines += [replay.markdown(), ""]
    if len(stops):
        lines += [
            f"The same rule (keep the top {100 * keep_fraction:.0f}% by RankMe) at every logged step:",
            "",
            "| stop at step | trials kept | steps saved | best configuration kept |",
            "|---|---|---|---|",
        ]
        lines += [
            f"| {row.step} | {row.trials_kept} | {100 * row.steps_saved_fraction:.0f}% | "
            f"{'yes' if row.best_kept else 'NO: the best configuration would have been stopped'} |"
            for row in stops.itertuples()
        ]
    return lines
