"""Score an outside model as an external point of a study: the study's pool, then a child run of it.

`study_rankme_pool` re-derives the pool the study's R was measured on from what its trials logged
(pretraining's params `rankme_shards_dir` or `shards_dir`, `crop_frames`, `rankme_n`, and the pool
fingerprint `rankme_pool`), choosing the pool most trials share; the fingerprint must come out the
same, so the external R is comparable with the trials' (same clips, offsets, crop length and N).
`log_external_point` writes the evaluation as a child run `external-<label>@<study>` of the study
run, tagged as external (sweeps.study.external_points): metrics `rankme`, `q`, `score/<task>`
and the evaluation's own (`pipeline.evaluate.tracking.evaluation_metrics`), the module's name and
the model file's sha256 as tags and params. Refitting the study (`python -m sweeps.laws --study
NAME`) draws it on the Q(R) figure and leaves it out of the fits.
"""

from __future__ import annotations

import math
import tempfile
from collections import Counter
from typing import Any

from pipeline.cli_errors import UserError
from pipeline.evaluate.hear_module import HearModule
from pipeline.evaluate.run import EvaluationResult, write_results
from pipeline.evaluate.tracking import evaluation_metrics
from pipeline.rankme.pool import RankMePool, select_pool
from pipeline.tracking import runs as tracking
from sweeps.report.fits import TASK_SCORE_PREFIX
from sweeps.study.context import child_run_name
from sweeps.study.external_points import (
    EXTERNAL_TAG,
    HEAR_MODULE_TAG,
    LABEL_PARAM,
    MODEL_DIGEST_TAG,
    trial_runs,
)
from sweeps.study.run_columns import number
from sweeps.study.tracking import STUDY_EXPERIMENT


def study_run_id(tracking_uri: str, study_name: str) -> str:
    run_id = tracking.find_run_id(tracking_uri, STUDY_EXPERIMENT, study_name)
    if run_id is None:
        raise UserError(
            f"--study {study_name}: no study run of that name in experiment {STUDY_EXPERIMENT!r} at "
            f"{tracking_uri}; check --study and --tracking-uri (the MLflow UI lists the study runs)"
        )
    return run_id


def _recorded_text(params: dict, key: str) -> str | None:
    value = params.get(key)
    return None if value in (None, "", "None", "null") else str(value)


def study_rankme_pool(tracking_uri: str, parent_run_id: str, study_name: str) -> RankMePool:
    """The RankMe pool most of the study's trials measured R on (see the module doc)."""
    trials = [
        run
        for run in trial_runs(tracking.list_child_runs(tracking_uri, parent_run_id))
        if _recorded_text(run["params"], "rankme_pool") and _recorded_text(run["params"], "crop_frames")
    ]
    if not trials:
        raise UserError(
            f"--study {study_name}: no trial records its RankMe pool (params rankme_pool, crop_frames); "
            "pass --rankme-shards DIR and --rankme-crop-frames N to measure R on a pool of your choice"
        )
    fingerprint, _ = Counter(run["params"]["rankme_pool"] for run in trials).most_common(1)[0]
    params, tags = next((run["params"], run["tags"]) for run in trials if run["params"]["rankme_pool"] == fingerprint)
    shards = _recorded_text(params, "rankme_shards_dir") or _recorded_text(params, "shards_dir")
    n = number(tags.get("resumed_param.rankme_n", params.get("rankme_n")))
    pool = select_pool(shards, crop_frames=int(params["crop_frames"]), n=None if math.isnan(n) else int(n))
    if pool.fingerprint != fingerprint:
        raise UserError(
            f"--study {study_name}: the pool re-derived from {shards} has fingerprint {pool.fingerprint}, "
            f"the trials measured on {fingerprint}: the shards changed since; pass --rankme-shards DIR "
            "(R is then on another pool and does not compare with the trials')"
        )
    return pool


def study_probe(tracking_uri: str, parent_run_id: str) -> str:
    """The scene probe the study scored Q with ("" when its run does not say)."""
    return tracking.read_run(tracking_uri, parent_run_id)["params"].get("probe", "")


def log_external_point(
    result: EvaluationResult,
    hear: HearModule,
    *,
    tracking_uri: str,
    parent_run_id: str,
    study_name: str,
    label: str,
    tasks_dir: str,
) -> str:
    """Write `result` as an external child run of the study run; returns its run id."""
    tags = {EXTERNAL_TAG: "true", HEAR_MODULE_TAG: hear.name, MODEL_DIGEST_TAG: hear.model_file_digest,
            "audioscale.stage": "evaluate", "eval_rankme_pool": result.rankme_pool,
            "eval_rankme_capped": str(result.rankme_capped).lower()}  # fmt: skip
    run = tracking.start_or_resume_run(
        tracking_uri=tracking_uri, experiment_name=STUDY_EXPERIMENT, run_name=child_run_name(study_name, f"external-{label}"),
        parent_run_id=parent_run_id, tags=tags,
    )  # fmt: skip
    run.log_params(_params(result, hear, label=label, tasks_dir=tasks_dir))
    scores = {f"{TASK_SCORE_PREFIX}{task}": score["mean"] for task, score in result.task_scores.items()}
    run.log_metrics({**evaluation_metrics(result), **scores, "eval_rankme_n": result.rankme_n}, step=0)
    with tempfile.TemporaryDirectory(prefix="audioscale-external-") as directory:
        for path in write_results(result, directory):
            run.log_artifact(path, artifact_path="evaluation")
    run.finish()
    return run.run_id


def _params(result: EvaluationResult, hear: HearModule, *, label: str, tasks_dir: str) -> dict[str, Any]:
    return {
        LABEL_PARAM: label, "hear_module": hear.name, "model_file": hear.model_file,
        "model_file_sha256": hear.model_file_digest, "sample_rate": hear.sample_rate_hz,
        "scene_embedding_size": hear.embedding_size, "tasks": sorted(result.task_scores), "tasks_dir": tasks_dir,
        "seeds": result.seeds, "rankme_n": result.rankme_n, "rankme_k": result.rankme_k,
        "rankme_pool": result.rankme_pool, "task_rankme_n": result.task_rankme_n, "q_probe": result.q_probe,
        **{f"probe_{key}": value for key, value in result.probe_protocol.items()},
    }  # fmt: skip
