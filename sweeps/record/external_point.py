"""An external point of a study: a model trained elsewhere, scored on the study's pool and probe.

Its child run (`external-<label>@<study>`, written by `python -m sweeps.external` through
sweeps.study.external_log) is tagged `audioscale.external` = "true"; its metrics are `rankme` and
`q` as a trial's are, so the tag alone keeps it out of the trial table and the fits, and
`external_points_table` hands it to the figures and the report (drawn, never fitted).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from pipeline.rankme.model_rankme import logged_rankme
from pipeline.tracking import runs as tracking
from sweeps.record import keys
from sweeps.record.checkpoint_point import Q_DECIMALS, rounded_metric

RunDict = dict[str, Any]
TABLE_COLUMNS = ["name", keys.RANKME_METRIC, keys.Q_METRIC, "hear_module", "model_file_sha256",
                 keys.RANKME_POOL_KEY, keys.RUN_ID_COLUMN]  # fmt: skip


@dataclass(frozen=True, kw_only=True)
class ExternalPoint:
    label: str  # the point's name on the figure
    hear_module: str
    model_file_sha256: str
    rankme: float  # on the study's RankMe pool
    q: float  # with the study's probe
    rankme_n: int = 0
    rankme_pool: str = ""  # the pool's fingerprint: the study's, unless the user chose another pool
    rankme_capped: bool = False
    task_scores: dict[str, float] = field(default_factory=dict)
    run_id: str = field(default="", compare=False)  # where it was read from; "" before it is written

    def run_name(self, study_name: str) -> str:
        return keys.child_run_name(study_name, f"{keys.EXTERNAL_RUN_PREFIX}{self.label}")

    def write(
        self, run: tracking.TrackedRun, *, extra_params: dict[str, Any] | None = None,
        extra_metrics: dict[str, float] | None = None,
    ) -> None:  # fmt: skip
        """Tags, params and metrics (step 0) of the point; `extra_*`: the evaluation's own, beside them."""
        run.set_tags({
            keys.EXTERNAL_TAG: "true", keys.HEAR_MODULE_TAG: self.hear_module,
            keys.MODEL_DIGEST_TAG: self.model_file_sha256, keys.EVAL_RANKME_POOL_TAG: self.rankme_pool,
            keys.EVAL_RANKME_CAPPED_TAG: str(self.rankme_capped).lower(),
        })  # fmt: skip
        run.log_params({
            **(extra_params or {}), keys.LABEL_PARAM: self.label, "hear_module": self.hear_module,
            "model_file_sha256": self.model_file_sha256, keys.RANKME_N_KEY: self.rankme_n,
            keys.RANKME_POOL_KEY: self.rankme_pool,
        })  # fmt: skip
        # Rounded as a trial's points are (sweeps.record.checkpoint_point): the UI shows what is stored.
        scores = {
            f"{keys.TASK_SCORE_PREFIX}{task}": rounded_metric(score, Q_DECIMALS)
            for task, score in self.task_scores.items()
        }
        run.log_metrics({**(extra_metrics or {}), keys.RANKME_METRIC: logged_rankme(self.rankme),
                         keys.Q_METRIC: rounded_metric(self.q, Q_DECIMALS), keys.EVAL_RANKME_N_METRIC: self.rankme_n,
                         **scores}, step=0)  # fmt: skip

    @classmethod
    def from_run(cls, run: RunDict) -> ExternalPoint:
        params, metrics, tags = run["params"], run["metrics"], run["tags"]
        return cls(
            label=params.get(keys.LABEL_PARAM) or tags.get(keys.HEAR_MODULE_TAG, run["run_name"]),
            hear_module=tags.get(keys.HEAR_MODULE_TAG, ""), model_file_sha256=tags.get(keys.MODEL_DIGEST_TAG, ""),
            rankme=_last(metrics, keys.RANKME_METRIC), q=_last(metrics, keys.Q_METRIC),
            rankme_n=int(_last(metrics, keys.EVAL_RANKME_N_METRIC, 0)), rankme_pool=tags.get(keys.EVAL_RANKME_POOL_TAG, ""),
            rankme_capped=str(tags.get(keys.EVAL_RANKME_CAPPED_TAG, "")).lower() == "true",
            task_scores={key.removeprefix(keys.TASK_SCORE_PREFIX): history[-1][1] for key, history in metrics.items()
                         if key.startswith(keys.TASK_SCORE_PREFIX)},
            run_id=run["run_id"],
        )  # fmt: skip


def is_external(run: RunDict) -> bool:
    return str(run["tags"].get(keys.EXTERNAL_TAG, "")).lower() == "true"


def external_points_table(points: list[ExternalPoint]) -> pd.DataFrame:
    """name, rankme, q, hear_module, model_file_sha256, rankme_pool, run_id of each point (the figures' input)."""
    rows = [[p.label, p.rankme, p.q, p.hear_module, p.model_file_sha256, p.rankme_pool, p.run_id] for p in points]
    return pd.DataFrame(rows, columns=TABLE_COLUMNS)


def _last(metrics: dict, key: str, default: float = np.nan) -> float:
    return metrics[key][-1][1] if metrics.get(key) else default
