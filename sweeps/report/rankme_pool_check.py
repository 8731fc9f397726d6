"""Whether a study's RankMe values compare: one pool, one N, and which values N < 8 K capped.

RankMe depends on the clips it embeds and grows with N, so Q(R) and early prediction are only
meaningful when every trial's R (training and evaluation) was measured on the same RankMe pool with
the same N (pipeline.rankme.pool). The report says so plainly instead of fitting silently.
"""

from __future__ import annotations

import pandas as pd

from pipeline.rankme.pool import MIN_SAMPLES_PER_FEATURE
from sweeps.record.keys import (
    RANKME_CAPPED_KEY,
    RANKME_N_KEY,
    RANKME_POOL_KEY,
    TRAINING_RANKME_N_COLUMN,
    TRAINING_RANKME_POOL_COLUMN,
    TRIAL_PARAM,
)


def _distinct(table: pd.DataFrame, column: str) -> list:
    if column not in table.columns:
        return []
    values = table[column].dropna()
    return sorted({value for value in values if value not in ("", None)}, key=str)


def rankme_pool_lines(trials: pd.DataFrame) -> list[str]:
    """Report lines: the pool and N every R used, or a warning naming what differs; capped trials."""
    if RANKME_POOL_KEY not in trials.columns or not len(trials):
        return []
    pool_columns, n_columns = (RANKME_POOL_KEY, TRAINING_RANKME_POOL_COLUMN), (RANKME_N_KEY, TRAINING_RANKME_N_COLUMN)
    pools = sorted({pool for column in pool_columns for pool in _distinct(trials, column)}, key=str)
    sizes = sorted({int(n) for column in n_columns for n in _distinct(trials, column)})
    lines = ["", "## RankMe pool", ""]
    if len(pools) == 1 and len(sizes) == 1:
        lines.append(f"Every RankMe (training and evaluation, all trials) used pool {pools[0]} with N = {sizes[0]}.")
    else:
        lines.append(
            f"WARNING: RankMe values were measured on {len(pools)} pool(s) {pools} with N in {sizes}; values "
            "from different pools or N do not compare, so Q(R) and early prediction mix incomparable R."
        )
    capped = (
        trials.loc[trials[RANKME_CAPPED_KEY].astype(bool), TRIAL_PARAM].tolist() if RANKME_CAPPED_KEY in trials else []
    )
    if capped:
        lines.append(
            f"Capped (N < {MIN_SAMPLES_PER_FEATURE} x embedding width K, so R is limited by N): {', '.join(map(str, capped))}; "
            "pass --rankme-n / a larger corpus for comparable values."
        )
    return lines
