"""An architecture study's own views (the RankMe study's Sec. IV-G, Fig. 7, Table V): one Q(R) per
architecture beside the Q(R) over all of them, and RankMe and Q per architecture at Base and Large.

Sec. IV-G: "under the same architecture but different parameter settings, each framework exhibits
its own scaling trend regarding RankMe", and Table V's use of it: compare the RankMe of small models
of each architecture to choose which to scale, without labels. Each per-architecture law is fitted
as the overall Q(R) is (every evaluated checkpoint of the architecture's trials, the reference
estimator, trials as the bootstrap unit), and needs as many distinct R values as any law.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from sweeps.laws.fits import fit_saturating
from sweeps.laws.optimizer import FitNotConvergedError
from sweeps.laws.result import LawFit
from sweeps.record.keys import Q_METRIC
from sweeps.report.checkpoints import checkpoint_rows

TABLE_V_SCALES = ("base", "large")  # Table V's two columns
# Table V of the study (RankMe / HEAR): the published values our table is read beside.
PAPER_TABLE_V = {
    "wav2vec2": {"base": (105.153, 0.539), "large": (265.285, 0.618)},
    "hubert": {"base": (237.024, 0.677), "large": (326.596, 0.689)},
    "mae": {"base": (344.012, 0.794), "large": (635.651, 0.801)},  # Dasheng
}


def fit_architecture_laws(
    trials: pd.DataFrame, *, min_distinct: int, n_bootstrap: int = 200, seed: int = 0
) -> tuple[dict[str, LawFit], dict[str, str]]:
    """arch -> its own Q(R) fit, and arch -> why it has none. Empty unless the trials span >= 2 architectures."""
    if "arch" not in trials.columns or trials["arch"].nunique() < 2:
        return {}, {}
    points = checkpoint_rows(trials)
    fits, skipped = {}, {}
    for arch, rows in points.groupby("arch", sort=True):
        distinct = rows["rankme"].nunique()
        if distinct < min_distinct:
            skipped[arch] = f"only {distinct} distinct RankMe value(s) among its checkpoints; need >= {min_distinct}"
            continue
        groups = rows["configuration"].to_numpy() if "configuration" in rows.columns else None
        try:
            fits[arch] = fit_saturating(
                rows["rankme"], rows[Q_METRIC], groups=groups, n_bootstrap=n_bootstrap, seed=seed
            )
        except (ValueError, FitNotConvergedError) as error:
            skipped[arch] = str(error)
    return fits, skipped


def architecture_scale_table(trials: pd.DataFrame) -> pd.DataFrame:
    """Table V's analogue: per architecture, R and Q of its Base and Large trials (last checkpoint; the
    mean over seeds, with how many), the model behind each, and the study's published pair."""
    if "scale" not in trials.columns or "arch" not in trials.columns:
        return pd.DataFrame()
    marked = trials[trials["scale"].isin(TABLE_V_SCALES)]
    rows = []
    for arch, group in marked.groupby("arch", sort=True):
        row = {"arch": arch}
        for scale in TABLE_V_SCALES:
            at_scale = group[group["scale"] == scale]
            row[f"{scale}_model"] = ", ".join(sorted(set(at_scale["model_name"].astype(str)))) if len(at_scale) else ""
            row[f"{scale}_rankme"] = float(at_scale["rankme"].mean()) if len(at_scale) else np.nan
            row[f"{scale}_q"] = float(at_scale[Q_METRIC].mean()) if len(at_scale) else np.nan
            row[f"{scale}_n"] = len(at_scale)
        rows.append(row)
    return pd.DataFrame(rows)


def _pair(rankme: float, q: float) -> str:
    return "-" if not np.isfinite(rankme) else f"{rankme:.2f} / {q:.4f}"


def rankme_predicts_q_at_base(table: pd.DataFrame) -> str | None:
    """Table V's claim, checked on this study: does ordering the Base models by RankMe order their Q?"""
    base = table[np.isfinite(table.get("base_rankme", pd.Series(dtype=float)))]
    if len(base) < 2:
        return None
    by_rankme = list(base.sort_values("base_rankme")["arch"])
    by_q = list(base.sort_values("base_q")["arch"])
    agree = by_rankme == by_q
    return (
        f"At Base scale, ordering the architectures by RankMe ({' < '.join(by_rankme)}) "
        f"{'gives the same order as' if agree else 'differs from'} ordering them by Q ({' < '.join(by_q)})."
    )


def architecture_markdown(trials: pd.DataFrame, fits: dict[str, LawFit], skipped: dict[str, str]) -> list[str]:
    """The report's architecture section: per-architecture Q(R) laws and the Table V analogue."""
    if not fits and not skipped:
        return []
    lines = [
        "",
        "## Per architecture (Sec. IV-G, Fig. 7, Table V)",
        "",
        "Each architecture's own Q(R) (its checkpoints only; the same estimator as the overall fit):",
        "",
        "| architecture | points | q_inf | x_c | alpha | R² |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for arch, fit in fits.items():
        params = {name: f"{fit.params[name]:.4g}" for name in ("q_inf", "x_c", "alpha")}
        lines.append(
            f"| {arch} | {fit.n_points} | {params['q_inf']} | {params['x_c']} | {params['alpha']} | {fit.r2:.3f} |"
        )
    for arch, reason in skipped.items():
        lines.append(f"| {arch} | - | not fitted: {reason} | | | |")
    table = architecture_scale_table(trials)
    if len(table):
        lines += [
            "",
            "RankMe R / Q at Base and Large scale (Table V's analogue; the study's published values "
            "beside them, measured on HEAR with public-scale pretraining):",
            "",
            "| architecture | Base (R / Q) | Large (R / Q) | models | paper Base | paper Large |",
            "| --- | --- | --- | --- | --- | --- |",
        ]
        for _, row in table.iterrows():
            paper = PAPER_TABLE_V.get(row["arch"], {})
            models = "; ".join(m for m in (row["base_model"], row["large_model"]) if m)
            lines.append(
                f"| {row['arch']} | {_pair(row['base_rankme'], row['base_q'])} | "
                f"{_pair(row['large_rankme'], row['large_q'])} | {models} | "
                f"{_pair(*paper['base']) if 'base' in paper else '-'} | "
                f"{_pair(*paper['large']) if 'large' in paper else '-'} |"
            )
        verdict = rankme_predicts_q_at_base(table)
        if verdict:
            lines += ["", verdict]
    return lines
