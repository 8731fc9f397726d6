"""How much Q and R move between training seeds of one configuration (`--train-seeds K`).

Q's interval of one trial covers the test clips (or the probe's seeds) only: the randomness of
pretraining itself (initialisation, masks, crop order) is a second noise source that a
one-seed study never measures. With replicates, each configuration's seeds give the
seed-to-seed standard deviation of Q and of R; the report puts it beside the typical half-width
of a single trial's Q interval, so a reader sees which noise dominates. A standard deviation of
two seeds is shown as the range only (a spread from two values is not an estimate to lean on).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from sweeps.record.keys import Q_CI_HIGH, Q_CI_LOW, Q_METRIC, RANKME_METRIC

MIN_SEEDS_FOR_SD = 3


def seed_spread_table(trials: pd.DataFrame) -> pd.DataFrame:
    """One row per configuration with two or more trial rows: seeds, Q's mean, SD (3+ seeds) and
    range, R's mean and SD, and the median half-width of its trials' own Q intervals."""
    if "configuration" not in trials.columns:
        return pd.DataFrame()
    rows = []
    for configuration, group in trials.groupby("configuration", sort=False):
        if len(group) < 2:
            continue
        q, r = group[Q_METRIC].astype(float), group[RANKME_METRIC].astype(float)
        enough = len(group) >= MIN_SEEDS_FOR_SD
        half_widths = (group.get(Q_CI_HIGH, np.nan) - group.get(Q_CI_LOW, np.nan)) / 2.0
        rows.append({
            "configuration": configuration, "seeds": len(group), "q_mean": q.mean(),
            "q_sd": q.std(ddof=1) if enough else np.nan, "q_min": q.min(), "q_max": q.max(),
            "r_mean": r.mean(), "r_sd": r.std(ddof=1) if enough else np.nan,
            "q_interval_half_width": float(np.nanmedian(half_widths)) if np.isfinite(half_widths).any() else np.nan,
        })  # fmt: skip
    return pd.DataFrame(rows)


def _cell(value: float, digits: int = 4) -> str:
    return "n/a" if not np.isfinite(value) else f"{value:.{digits}f}"


def seed_spread_markdown(trials: pd.DataFrame) -> list[str]:
    """The section, or nothing for a study of one seed per configuration."""
    table = seed_spread_table(trials)
    if table.empty:
        return []
    lines = [
        "", "## Training seeds", "",
        "Each configuration trained with several seeds (`--train-seeds`): the spread of Q and R between "
        "seeds, beside the median half-width of one trial's Q interval (test clips or probe seeds). "
        f"SD needs {MIN_SEEDS_FOR_SD}+ seeds; with 2 only the range is shown.", "",
        "| configuration | seeds | Q mean | Q SD | Q range | R mean | R SD | one trial's Q half-width |",
        "|---|---|---|---|---|---|---|---|",
    ]  # fmt: skip
    for row in table.itertuples():
        lines.append(
            f"| {row.configuration} | {row.seeds} | {row.q_mean:.4f} | {_cell(row.q_sd)} | "
            f"{row.q_min:.4f} to {row.q_max:.4f} | {row.r_mean:.2f} | {_cell(row.r_sd, 2)} | "
            f"{_cell(row.q_interval_half_width)} |"
        )
    sds, widths = table["q_sd"].dropna(), table["q_interval_half_width"].dropna()
    if len(sds) and len(widths):
        ratio = float(sds.median() / widths.median()) if widths.median() > 0 else np.inf
        lines += ["", f"Median seed-to-seed SD of Q {sds.median():.4f} against a median one-trial half-width of "
                      f"{widths.median():.4f} (ratio {ratio:.2f}): "
                      + ("training seeds move Q more than the evaluation's own noise." if ratio > 1
                         else "the evaluation's own noise is the larger.")]  # fmt: skip
    return lines
