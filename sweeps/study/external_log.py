"""Score an outside model as an external point of a study: the study's pool, then a child run of it.

`study_rankme_pool` reads the pool the study's R was measured on from the study run's
`rankme_pool.json` (sweeps.record.rankme_pool, written by its first trial) and selects it again;
the fingerprint must come out the same, so the external R is comparable with the trials' (same
clips, offsets, crop length and N). `log_external_point` writes the evaluation as a child run
`external-<label>@<study>` of the study run (sweeps.record.external_point): metrics `rankme`, `q`,
`score/<task>` and the evaluation's own (`pipeline.evaluate.tracking.evaluation_metrics`), the
module's name and the model file's sha256 as tags and params. Refitting the study (`python -m
sweeps.laws --study NAME`) draws it on the Q(R) figure and leaves it out of the fits.
"""

from __future__ import annotations

import tempfile
from typing import Any

from pipeline.cli.errors import UserError
from pipeline.evaluate.run import EvaluationResult, write_results
from pipeline.evaluate.tracking import evaluation_metrics
from pipeline.interop.hear_module import HearModule
from pipeline.rankme.pool import RankMePool
from pipeline.tracking import runs as tracking
from sweeps.record.external_point import ExternalPoint
from sweeps.record.keys import RANKME_POOL_ARTIFACT, STUDY_EXPERIMENT, TASK_SET_TAG
from sweeps.record.rankme_pool import read_rankme_pool
from sweeps.record.replicates import write_q_replicates
from sweeps.record.study import StudyNotFoundError, find_study_run, read_study_settings


def study_run_id(tracking_uri: str, study_name: str) -> str:
    try:
        return find_study_run(tracking_uri, study_name)
    except StudyNotFoundError as error:
        raise UserError(f"--study {study_name}: {error}") from None


def study_probe(tracking_uri: str, study_run: str) -> str:
    """The scene probe the study scored Q with ("" when its run does not say)."""
    return read_study_settings(tracking_uri, study_run, study_name="").probe


def study_rankme_pool(tracking_uri: str, study_run: str, study_name: str) -> RankMePool:
    """The RankMe pool the study measured R on (see the module doc)."""
    record = read_rankme_pool(tracking_uri, study_run)
    if record is None:
        raise UserError(
            f"--study {study_name}: the study run records no RankMe pool (it has no artifact "
            f"{RANKME_POOL_ARTIFACT}: a study logged before the pool was recorded, or one whose trials never "
            "finished); pass --rankme-shards DIR and --rankme-crop-frames N to measure R on a pool of your choice"
        )
    pool = record.select()
    if pool.fingerprint != record.fingerprint:
        raise UserError(
            f"--study {study_name}: the pool re-selected from {record.shards_dir} has fingerprint {pool.fingerprint}, "
            f"the trials measured on {record.fingerprint}: the shards changed since; pass --rankme-shards DIR "
            "(R is then on another pool and does not compare with the trials')"
        )
    return pool


def log_external_point(
    result: EvaluationResult,
    hear: HearModule,
    *,
    tracking_uri: str,
    parent_run_id: str,
    study_name: str,
    label: str,
    tasks_dir: str,
    task_set: str = "",
) -> str:
    """Write `result` as an external child run of the study run; returns its run id. `task_set`: how
    its tasks compare with the study's (sweeps.study.external_task_set), kept as a tag of the run."""
    point = ExternalPoint(
        label=label, hear_module=hear.name, model_file_sha256=hear.model_file_digest, rankme=result.rankme,
        q=result.q, rankme_n=result.rankme_n, rankme_pool=result.rankme_pool, rankme_capped=result.rankme_capped,
        task_scores={task: score["mean"] for task, score in result.task_scores.items()},
    )  # fmt: skip
    run = tracking.start_or_resume_run(
        tracking_uri=tracking_uri, experiment_name=STUDY_EXPERIMENT, run_name=point.run_name(study_name),
        parent_run_id=parent_run_id, tags={"audioscale.stage": "evaluate"},
    )  # fmt: skip
    if task_set:
        run.set_tags({TASK_SET_TAG: task_set})
    point.write(run, extra_params=_params(result, hear, tasks_dir=tasks_dir), extra_metrics=evaluation_metrics(result))
    write_q_replicates(run, {0: result.q_replicates})  # pairs the point with the study's checkpoints
    with tempfile.TemporaryDirectory(prefix="audioscale-external-") as directory:
        for path in write_results(result, directory):
            run.log_artifact(path, artifact_path="evaluation")
    run.finish()
    return run.run_id


def _params(result: EvaluationResult, hear: HearModule, *, tasks_dir: str) -> dict[str, Any]:
    """The evaluation's params beside the point's own (label, module, digest, N, pool)."""
    return {
        "model_file": hear.model_file, "sample_rate": hear.sample_rate_hz,
        "scene_embedding_size": hear.embedding_size, "tasks": sorted(result.task_scores), "tasks_dir": tasks_dir,
        "seeds": result.seeds, "rankme_k": result.rankme_k, "task_rankme_n": result.task_rankme_n,
        "q_probe": result.q_probe, **{f"probe_{key}": value for key, value in result.probe_protocol.items()},
    }  # fmt: skip
