"""What the report knows about the study beside its trial table: name, grid, probe, seeds; and the
names it shows for them (one name per quantity, the same in tables, figures and MLflow).

`rankme` is RankMe on the study's RankMe pool (pipeline.rankme.model_rankme), the R of every fit and of
early prediction, measured the same way in training and evaluation; `task_rankme` is the
evaluation's diagnostic on task audio and is never R.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from sweeps.record.keys import RANKME_N_KEY, TASK_SCORE_PREFIX

# Grid -> the laws whose axis it varies on purpose (sweeps.study.grids). Q(R) is fitted on every grid.
LAW_GRIDS = {
    "Q(N)": ({"size"}, "model size"),
    "Q(D)": ({"data_volume"}, "data volume"),
    "Q(C)": ({"compute", "size"}, "compute"),  # Fig. 5a's frontier: sizes x steps
}
JOINT_GRIDS = {"size", "data_volume"}  # Q(N,D) needs both


def grid_names(grid: str | None) -> set[str] | None:
    """'size,data_volume' -> {'size', 'data_volume'}; None when the study's grid is not known."""
    if not grid:
        return None
    return {name.strip() for name in str(grid).split(",") if name.strip()}


def law_not_on_grid(law: str, grid: str | None) -> str | None:
    """Why `law` is not fitted on this grid (its axis moves only as a side effect), or None."""
    names = grid_names(grid)
    if names is None:
        return None
    if law == "Q(N,D)" and not JOINT_GRIDS <= names:
        return f"the grid does not vary both model size and data volume (grid: {grid})"
    if law in LAW_GRIDS and not LAW_GRIDS[law][0] & names:
        what = LAW_GRIDS[law][1]
        return f"the grid does not vary {what} (grid: {grid}); it moves only as a side effect, not on purpose"
    return None


def _one_value(trials: pd.DataFrame, column: str):
    if column not in trials.columns:
        return None
    values = pd.to_numeric(trials[column], errors="coerce").dropna().unique()
    return values[0] if len(values) == 1 else None


def rankme_axis_label(trials: pd.DataFrame) -> str:
    """'RankMe R (pool, N=4096)': the R of the fits, with the N that makes values compare."""
    n = _one_value(trials, RANKME_N_KEY)
    return f"RankMe R (pool, N={int(n)})" if n is not None and n > 0 else "RankMe R (pool)"


def quality_axis_label(trials: pd.DataFrame) -> str:
    """'quality Q (mean of 7 task scores)': Q with what it averages, where the table says (a score
    has no unit)."""
    tasks = [c for c in trials.columns if c.startswith(TASK_SCORE_PREFIX) and trials[c].notna().any()]
    return f"quality Q (mean of {len(tasks)} task scores)" if tasks else "quality Q"


@dataclass(frozen=True, kw_only=True)
class StudyInfo:
    name: str = ""
    grid: str = ""  # as passed to --grid: "mask_ratio", "size,data_volume"
    probe: str = ""  # the scene probe behind every Q (pipeline.evaluate.probes.scene)
    probe_seeds: int = 0  # probe seeds behind each Q's interval; 0: unknown

    def seeds_of(self, trials: pd.DataFrame) -> np.ndarray:
        """Per row: its logged `probe_seeds`, else the study's (0: unknown)."""
        logged = pd.to_numeric(trials.get("probe_seeds", pd.Series(np.nan, index=trials.index)), errors="coerce")
        return logged.fillna(self.probe_seeds).to_numpy(float)

    def title(self, what: str, n_points: int, n_trials: int | None = None) -> str:
        """One line a figure can carry: what, how many points and trials, which probe. The study's
        name and grid go into the file's metadata (`description`), not onto the picture."""
        counted = f"{n_points} points" + (f" from {n_trials} trials" if n_trials is not None else "")
        return f"{what}: {counted}" + (f", {self.probe} probe" if self.probe else "")

    def description(self) -> str:
        parts = [f"study {self.name}" if self.name else "", f"grid {self.grid}" if self.grid else "",
                 f"probe {self.probe}" if self.probe else ""]  # fmt: skip
        return ", ".join(part for part in parts if part)
