"""Early prediction: does RankMe early in training predict the final quality (the study's Table III)?"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from scipy.stats import pearsonr


def pearson_early_prediction(rankme_by_step: Any, final_q: Any) -> pd.DataFrame:
    """Pearson r between RankMe at each logged step and the final Q across trials (Table III).

    `rankme_by_step`: one entry per trial, a {step: rankme} mapping or a list of (step, rankme).
    Returns columns step, pearson_r, n_trials; steps seen in fewer than 3 trials are left out.
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
        r = float(pearsonr(rankmes, qs).statistic) if np.ptp(rankmes) > 0 and np.ptp(qs) > 0 else float("nan")
        rows.append({"step": step, "pearson_r": r, "n_trials": len(pairs)})
    return pd.DataFrame(rows, columns=["step", "pearson_r", "n_trials"])
