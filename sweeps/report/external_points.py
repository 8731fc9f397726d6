"""Outside models on a study's Q(R) figure: drawn apart from the trials and never fitted.

An external point is a public or user model scored on the study's RankMe pool with the study's
probe (`python -m sweeps.external --hear-module PKG.MODULE --study NAME`), as the RankMe study
(Deng et al., Sec. IV-G, Table IV: public checkpoints marked *) scores public models beside its own.
It shows where that model sits against the study's law; it was not trained under the study's
recipe, so it takes no part in any fit (sweeps.record.study leaves it out of the trial table).

The points come as a table with columns `name`, `rankme`, `q` (sweeps.record.external_point.external_points_table).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from sweeps.record.keys import Q_METRIC, RANKME_METRIC
from sweeps.report.label_layout import add_point_label

EXTERNAL_LEGEND = "external (HEAR module, not fitted)"
EXTERNAL_MARKER = "D"  # a diamond: the trials are round dots and stars
EXTERNAL_COLOUR = "white"  # open, black-edged: every filled colour names a trial


def drawable_external_points(external: pd.DataFrame | None) -> pd.DataFrame:
    """The external points with a finite R and Q: what the figure places (an R of NaN has no x)."""
    if external is None or external.empty:
        return pd.DataFrame(columns=["name", RANKME_METRIC, Q_METRIC])
    finite = np.isfinite(external[RANKME_METRIC].astype(float)) & np.isfinite(external[Q_METRIC].astype(float))
    return external.loc[finite, ["name", RANKME_METRIC, Q_METRIC]].reset_index(drop=True)


def plot_external_points(ax, external: pd.DataFrame | None) -> pd.DataFrame:
    """Place each external point (open diamond, named) on a Q(R) axes; returns what was placed. Its
    label is a point label (sweeps.report.label_layout): it never prints over a trial's."""
    points = drawable_external_points(external)
    if points.empty:
        return points
    ax.scatter(points[RANKME_METRIC], points[Q_METRIC], s=40, marker=EXTERNAL_MARKER, color=EXTERNAL_COLOUR,
               edgecolors="black", linewidths=0.8, zorder=5, label=EXTERNAL_LEGEND)  # fmt: skip
    for name, rankme, q in points.itertuples(index=False):
        add_point_label(ax, str(name), float(rankme), float(q), colour="black", weight="bold")
    return points


def external_points_lines(external: pd.DataFrame | None) -> list[str]:
    """One summary line naming every external point, and saying the fits leave them out."""
    if external is None or external.empty:
        return []
    named = "; ".join(f"{row.name} R {row.rankme:.4g}, Q {row.q:.4f}" for row in external.itertuples(index=False))
    return [f"External models (HEAR modules on the study's pool and probe; drawn, not used in any fit): {named}"]
