"""Which child runs of a study are external points, and their (R, Q) as a table.

An external point (`python -m pipeline.evaluate --hear-module PKG.MODULE --study NAME`, logged by
sweeps.study.external_log) is a child run of the study run tagged EXTERNAL_TAG = "true": a model
trained elsewhere, scored on the study's RankMe pool with the study's probe. Its metrics are
`rankme` and `q` as a trial's are, so the tag alone keeps it out of the trial table and the fits
(`trial_table_from_runs`), and `external_points_table` hands it to the figures.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

EXTERNAL_TAG = "audioscale.external"
HEAR_MODULE_TAG = "audioscale.hear_module"
MODEL_DIGEST_TAG = "audioscale.model_file_sha256"
LABEL_PARAM = "label"  # the point's name on the figure


def is_external(run: dict[str, Any]) -> bool:
    return str(run["tags"].get(EXTERNAL_TAG, "")).lower() == "true"


def trial_runs(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The study's own trials: every child run but the external points."""
    return [run for run in runs if not is_external(run)]


def _last(metrics: dict, key: str) -> float:
    return metrics[key][-1][1] if metrics.get(key) else np.nan


def external_points_table(runs: list[dict[str, Any]]) -> pd.DataFrame:
    """name, rankme, q, hear_module, model_file_sha256, rankme_pool, run_id of each external point."""
    rows = [
        {
            "name": run["params"].get(LABEL_PARAM) or run["tags"].get(HEAR_MODULE_TAG, run["run_name"]),
            "rankme": _last(run["metrics"], "rankme"),
            "q": _last(run["metrics"], "q"),
            "hear_module": run["tags"].get(HEAR_MODULE_TAG, ""),
            "model_file_sha256": run["tags"].get(MODEL_DIGEST_TAG, ""),
            "rankme_pool": run["tags"].get("eval_rankme_pool", ""),
            "run_id": run["run_id"],
        }
        for run in runs
        if is_external(run)
    ]
    return pd.DataFrame(
        rows, columns=["name", "rankme", "q", "hear_module", "model_file_sha256", "rankme_pool", "run_id"]
    )
