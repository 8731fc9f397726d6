"""Early prediction: does RankMe early in training predict the final quality (the study's Table III)?"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from scipy.stats import pearsonr

from sweeps.protocol.early_stop_rule import DEFAULT_KEEP_FRACTION, should_stop
from sweeps.protocol.recipe import TABLE_III_HEAR_STEP
from sweeps.record.keys import Q_METRIC
from sweeps.report.intervals import Z_95
from sweeps.report.study_info import rankme_axis_label

# Paper Sec. IV-E, Table III: Pearson r between RankMe at an early step and HEAR at 700k steps
# (the end of training), across 45 models.
PAPER_TABLE_III_FINAL_STEP = TABLE_III_HEAR_STEP
PAPER_TABLE_III = {50_000: 0.636, 100_000: 0.790, 200_000: 0.855, 300_000: 0.862}
# Fractions of the horizon are pooled after rounding: 50/700 and 100/1400 are one row.
FRACTION_DECIMALS = 4
EARLY_COLUMNS = ["fraction", "steps", "pearson_r", "r_ci_low", "r_ci_high", "n_trials", "note", "paper_pcc"]


def fisher_interval(r: float, n: int) -> tuple[float, float]:
    """95% interval of a Pearson r over n pairs: tanh(atanh(r) +- 1.96 / sqrt(n - 3)) (Fisher's z,
    for roughly bivariate-normal pairs); NaN with n <= 3 or an undefined r. With 5 trials it spans
    most of (-1, 1): Table III's PCCs need the paper's 45 models to mean something."""
    if n <= 3 or not np.isfinite(r):
        return float("nan"), float("nan")
    z, half = np.arctanh(np.clip(r, -0.999999, 0.999999)), Z_95 / np.sqrt(n - 3)
    return float(np.tanh(z - half)), float(np.tanh(z + half))


def _history(entry: Any) -> dict[int, float]:
    return {int(step): float(value) for step, value in dict(entry).items()}


def trial_horizon(history: dict[int, float], planned: Any) -> int:
    """The step a trial's final Q belongs to: its planned `train_steps`, else its largest logged step."""
    if not pd.isna(planned):
        return int(planned)
    return max(history, default=0)


def early_points(rankme_by_step: Any, horizons: Any | None = None) -> list[dict[float, tuple[int, float]]]:
    """Per trial: {fraction of its horizon: (step, RankMe)} for every step before the horizon.

    The horizon's own step is left out: RankMe there is the final checkpoint's, and correlating it
    with the final Q would be the final step correlated with itself, which Table III never does.
    """
    histories = [_history(h) for h in rankme_by_step]
    planned = [None] * len(histories) if horizons is None else list(horizons)
    if len(planned) != len(histories):
        raise ValueError(f"horizons has {len(planned)} entries but rankme_by_step has {len(histories)}")
    points = []
    for history, plan in zip(histories, planned):
        horizon = trial_horizon(history, plan)
        points.append({
            round(step / horizon, FRACTION_DECIMALS): (step, value)
            for step, value in sorted(history.items()) if 0 < step < horizon
        })  # fmt: skip
    return points


def _paper_pcc(fraction: float) -> float:
    """Table III's r where our fraction is one of its step / 700k fractions; NaN elsewhere."""
    for step, pcc in PAPER_TABLE_III.items():
        if round(step / PAPER_TABLE_III_FINAL_STEP, FRACTION_DECIMALS) == fraction:
            return pcc
    return float("nan")


def pearson_early_prediction(rankme_by_step: Any, final_q: Any, horizons: Any | None = None) -> pd.DataFrame:
    """Pearson r between RankMe at each fraction of training and the final Q across trials (Table III).

    `rankme_by_step`: one entry per trial, a {step: rankme} mapping or a list of (step, rankme);
    `horizons`: each trial's planned training steps (NaN or None: its largest logged step).
    Trials of different horizons are compared at equal fractions of their horizon. Returns
    columns fraction, steps (the steps pooled in the row), pearson_r, n_trials, note, paper_pcc;
    fractions seen in fewer than 3 trials are left out. r is NaN when RankMe or Q is the same in
    every trial at a fraction, and `note` says which.
    """
    points = early_points(rankme_by_step, horizons)
    final = np.asarray(final_q, dtype=float).reshape(-1)
    if len(points) != len(final):
        raise ValueError(f"rankme_by_step has {len(points)} trials but final_q has {len(final)}")
    rows = []
    for fraction in sorted({f for trial in points for f in trial}):
        pairs = [
            (trial[fraction][0], trial[fraction][1], q)
            for trial, q in zip(points, final)
            if fraction in trial and np.isfinite(trial[fraction][1]) and np.isfinite(q)
        ]
        if len(pairs) < 3:
            continue
        steps, rankmes, qs = (np.array(column) for column in zip(*pairs))
        constant = [name for name, values in (("RankMe", rankmes), ("final Q", qs)) if np.ptp(values) == 0]
        r = float("nan") if constant else float(pearsonr(rankmes, qs).statistic)
        low, high = fisher_interval(r, len(pairs))
        rows.append({
            "fraction": fraction, "steps": ", ".join(str(s) for s in sorted(set(steps.tolist()))),
            "pearson_r": r, "r_ci_low": low, "r_ci_high": high, "n_trials": len(pairs),
            "note": f"undefined: {' and '.join(constant)} identical in every trial" if constant else "",
            "paper_pcc": _paper_pcc(fraction),
        })  # fmt: skip
    return pd.DataFrame(rows, columns=EARLY_COLUMNS)


def simulate_rankme_early_stop(
    rankme_by_step: Any, final_q: Any, trial_names: Any, *, keep_fraction: float = DEFAULT_KEEP_FRACTION
) -> pd.DataFrame:
    """What stopping the low-RankMe trials at each logged step would have saved, and cost.

    At step s, apply the early-stop rule (`sweeps.protocol.early_stop_rule.should_stop`, the live
    scheduler's rule) to every trial with a RankMe there, all trials seen at once: keep the top
    ceil(keep_fraction x n) by RankMe and stop the rest there. Columns: step, trials_kept,
    steps_saved_fraction (of all trials' steps), best_kept (whether the trial with the best final
    Q survives). Computed on finished trials, so it answers "would the scheduler have changed the
    best configuration?" without running it.
    """
    histories = [{int(step): float(value) for step, value in dict(h).items()} for h in rankme_by_step]
    final = np.asarray(final_q, dtype=float).reshape(-1)
    names = list(trial_names)
    total_steps = np.array([max(h, default=0) for h in histories], dtype=float)
    best = names[int(np.nanargmax(final))]
    rows = []
    for step in sorted({s for h in histories for s in h if s < max(h)}):
        at_step = {i: h[step] for i, h in enumerate(histories) if step in h}
        if len(at_step) < 2:
            continue
        seen = list(at_step.values())
        stopped = [i for i, rankme in at_step.items() if should_stop(rankme, seen, keep_fraction=keep_fraction)]
        kept = {names[i] for i in range(len(names)) if i not in stopped}
        saved = float(np.sum(total_steps[stopped] - step) / max(total_steps.sum(), 1.0))
        rows.append(
            {
                "step": step,
                "trials_kept": len(at_step) - len(stopped),
                "steps_saved_fraction": saved,
                "best_kept": best in kept,
            }  # fmt: skip
        )
    return pd.DataFrame(rows, columns=["step", "trials_kept", "steps_saved_fraction", "best_kept"])


def _interval_cell(row) -> str:
    if not np.isfinite(row.r_ci_low):
        return f"n/a ({row.n_trials} trials)" if np.isfinite(row.pearson_r) else "n/a"
    cell = f"{row.r_ci_low:.2f} to {row.r_ci_high:.2f}"
    return cell + (" (includes 0)" if row.r_ci_low <= 0.0 <= row.r_ci_high else "")


def early_prediction_markdown(trials: pd.DataFrame) -> list[str]:
    """The Table III section: ours by fraction of the horizon, the paper's beside it."""
    horizons = trials["train_steps"] if "train_steps" in trials.columns else None
    correlations = pearson_early_prediction(trials["rankme_by_step"], trials[Q_METRIC], horizons)
    if horizons is None or pd.isna(horizons).all():
        horizon_note = (
            "The trial table has no `train_steps`: each trial's largest logged RankMe step is taken as its "
            "horizon (the checkpoint its final Q belongs to) and left out."
        )
    else:
        n_missing = int(pd.isna(horizons).sum())
        horizon_note = "Each trial's horizon is its planned `train_steps`" + (
            f"; {n_missing} trial(s) without one fall back to their largest logged step." if n_missing else "."
        )
    lines = [
        "", "## Does early RankMe predict final quality? (paper Table III)", "",
        (f"Pearson r between {rankme_axis_label(trials)} part-way through training (the R of Q(R), on the same "
         "pool) and the final Q, trials pooled at equal fractions "
         f"of their horizon; the final step is never correlated with itself. {horizon_note}"), "",
        "| fraction of horizon | steps | Pearson r | 95% interval (Fisher z) | trials | paper PCC at this fraction |",
        "|---|---|---|---|---|---|",
    ]  # fmt: skip
    for row in correlations.itertuples():
        r = f"{row.pearson_r:.3f}" if np.isfinite(row.pearson_r) else row.note
        paper = f"{row.paper_pcc:.3f}" if np.isfinite(row.paper_pcc) else "none at this fraction"
        lines.append(f"| {row.fraction:.4f} | {row.steps} | {r} | {_interval_cell(row)} | {row.n_trials} | {paper} |")
    lines += ["", "The paper's Table III (45 models, HEAR at 700k steps):", "",
              "| RankMe step | fraction of 700k | PCC |", "|---|---|---|"]  # fmt: skip
    lines += [
        f"| {step // 1000}k | {step / PAPER_TABLE_III_FINAL_STEP:.4f} | {pcc:.3f} |"
        for step, pcc in PAPER_TABLE_III.items()
    ]
    return lines
