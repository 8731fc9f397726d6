"""Early prediction: does RankMe early in training predict the final quality (the study's Table III)?"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from scipy.stats import pearsonr

from sweeps.study.early_stop_rule import DEFAULT_KEEP_FRACTION, should_stop


def pearson_early_prediction(rankme_by_step: Any, final_q: Any) -> pd.DataFrame:
    """Pearson r between RankMe at each logged step and the final Q across trials (Table III).

    `rankme_by_step`: one entry per trial, a {step: rankme} mapping or a list of (step, rankme).
    Returns columns step, pearson_r, n_trials, note; steps seen in fewer than 3 trials are left
    out. r is NaN when RankMe or Q is the same in every trial at a step, and `note` says which.
    """
    histories = [{int(step): float(value) for step, value in dict(h).items()} for h in rankme_by_step]
    final = np.asarray(final_q, dtype=float).reshape(-1)
    if len(histories) != len(final):
        raise ValueError(f"rankme_by_step has {len(histories)} trials but final_q has {len(final)}")
    steps = sorted({int(step) for history in histories for step in history})
    rows = []
    for step in steps:
        pairs = [
            (float(h[step]), q)
            for h, q in zip(histories, final)
            if step in h and np.isfinite(h[step]) and np.isfinite(q)
        ]
        if len(pairs) < 3:
            continue
        rankmes, qs = np.array(pairs).T
        constant = [name for name, values in (("RankMe", rankmes), ("final Q", qs)) if np.ptp(values) == 0]
        r = float("nan") if constant else float(pearsonr(rankmes, qs).statistic)
        note = f"undefined: {' and '.join(constant)} identical in every trial" if constant else ""
        rows.append({"step": step, "pearson_r": r, "n_trials": len(pairs), "note": note})
    return pd.DataFrame(rows, columns=["step", "pearson_r", "n_trials", "note"])


def simulate_rankme_early_stop(
    rankme_by_step: Any, final_q: Any, trial_names: Any, *, keep_fraction: float = DEFAULT_KEEP_FRACTION
) -> pd.DataFrame:
    """What stopping the low-RankMe trials at each logged step would have saved, and cost.

    At step s, apply the early-stop rule (`sweeps.study.early_stop_rule.should_stop`, the live
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
            {"step": step, "trials_kept": len(at_step) - len(stopped), "steps_saved_fraction": saved,
             "best_kept": best in kept}  # fmt: skip
        )
    return pd.DataFrame(rows, columns=["step", "trials_kept", "steps_saved_fraction", "best_kept"])
