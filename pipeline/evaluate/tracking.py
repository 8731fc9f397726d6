"""Evaluation results in MLflow, through `pipeline.tracking.runs` (the only module importing mlflow).

Where results go: a child run `evaluate-step<step>` of the pretraining run (found from the
checkpoint's `pretrain_config.mlflow_run_id`, or given), holding every number, the parameters
(tasks, seeds, RankMe N, K and pool fingerprint, task-audio RankMe's N, the scene probe
`probe_schedule` (hear | quick | linear | knn), `lid_head`, which probe scored each task,
`<task>/probe`, and the probes behind Q, `q_probe`) and the JSON/CSV tables; the headline metrics
(`eval_q`, `eval_rankme`, `eval_rankme_n`, `eval_rankme_k`) are also logged on the pretraining run
itself at the checkpoint's step, so Q and R sit beside the training curves. `rankme_capped`
(N < 8 K) is a tag on the evaluation run, `eval_rankme_capped` / `eval_rankme_pool` on the
pretraining run. Without a pretraining run the evaluation run stands alone in the experiment
`evaluate`.
"""

from __future__ import annotations

import math
import tempfile
from pathlib import Path

from pipeline.cli.errors import UserError
from pipeline.evaluate.run import EvaluationResult, write_results
from pipeline.tracking.keys import (
    EVAL_Q_METRIC,
    EVAL_RANKME_CAPPED_TAG,
    EVAL_RANKME_N_METRIC,
    EVAL_RANKME_POOL_TAG,
    LEGACY_EVAL_RANKME_METRIC,
    Q_METRIC,
    RANKME_K_KEY,
    RANKME_METRIC,
    RANKME_N_KEY,
    RANKME_POOL_KEY,
    READOUT_AND_INPUT_KEYS,
    TASK_RANKME_METRIC,
)
from pipeline.tracking.runs import (
    RunNotFoundError,
    TrackedRun,
    attach_run,
    experiment_name_of_run,
    read_run,
    resolve_tracking_uri,
    start_or_resume_run,
)

STANDALONE_EXPERIMENT = "evaluate"
CHECKPOINT_TAG = "audioscale.checkpoint_dir"


def pretraining_run_id(meta: dict) -> str | None:
    """The MLflow run that produced a checkpoint, when its model.json records it."""
    return (meta.get("pretrain_config") or {}).get("mlflow_run_id") or meta.get("mlflow_run_id")


def checkpoint_dir_of_run(tracking_uri: str | None, run_id: str) -> Path | str:
    """The newest checkpoint of a pretraining run: its `audioscale.checkpoint_dir` tag (a folder, or
    a bucket URI as given), else the highest-step checkpoint under the run's local Ray storage
    (`storage_path/run_name`)."""
    uri = resolve_tracking_uri(tracking_uri)
    try:
        run = read_run(uri, run_id)
    except RunNotFoundError:
        raise UserError(
            f"--run-id {run_id}: no such run in the MLflow store {uri}; copy the id from the MLflow UI "
            "(or the pretraining's closing lines), pass --tracking-uri for another store, or pass --checkpoint PATH"
        ) from None
    tagged = run["tags"].get(CHECKPOINT_TAG)
    if tagged and "://" in tagged:
        return tagged  # read (and checked) by pipeline.storage.checkpoint_copy.local_checkpoint
    if tagged and (Path(tagged) / "model.json").is_file():
        return Path(tagged)
    storage_path, run_name = run["params"].get("storage_path"), run["params"].get("run_name")
    candidates = []
    if storage_path and run_name and "://" not in storage_path:
        candidates = sorted(
            (Path(storage_path) / run_name).glob("**/checkpoint_step_*/model.json"), key=lambda p: p.parent.name
        )
    if not candidates:
        raise FileNotFoundError(
            f"MLflow run {run_id} names no local checkpoint (tag {CHECKPOINT_TAG} or storage_path/run_name); "
            "pass --checkpoint PATH instead"
        )
    return candidates[-1].parent


def _finite(value: float) -> bool:
    return value is not None and not math.isnan(value)


def evaluation_metrics(result: EvaluationResult) -> dict[str, float]:
    """Q, RankMe, each task's score with its interval where one exists, and the timings."""
    metrics = {
        Q_METRIC: result.q,
        RANKME_METRIC: result.rankme,
        RANKME_N_KEY: result.rankme_n,
        RANKME_K_KEY: result.rankme_k,
        TASK_RANKME_METRIC: result.task_rankme,
    }
    for task, score in result.task_scores.items():
        metrics[f"{task}/score"] = score["mean"]
        if _finite(score["ci_low"]):
            metrics[f"{task}/ci_low"] = score["ci_low"]
            metrics[f"{task}/ci_high"] = score["ci_high"]
        if _finite(score.get("test_se")):  # deterministic probes: the bootstrap over test clips
            metrics[f"{task}/test_se"] = score["test_se"]
            metrics[f"{task}/test_ci_low"] = score["test_ci_low"]
            metrics[f"{task}/test_ci_high"] = score["test_ci_high"]
    metrics.update({f"seconds/{key}": value for key, value in result.seconds.items()})
    return metrics


def log_evaluation(
    result: EvaluationResult,
    *,
    tracking_uri: str | None,
    parent_run_id: str | None = None,
    tasks_dir: str | None = None,
) -> str:
    """Log `result` (see module docstring); returns the evaluation run's id."""
    uri = resolve_tracking_uri(tracking_uri)
    run_name = f"evaluate-step{result.step}"
    if parent_run_id is not None:
        experiment_name = experiment_name_of_run(uri, parent_run_id)
    else:
        experiment_name = STANDALONE_EXPERIMENT
    run = start_or_resume_run(
        tracking_uri=uri,
        experiment_name=experiment_name,
        run_name=f"{run_name}-{Path(result.checkpoint_dir).name}" if parent_run_id is None else run_name,
        parent_run_id=parent_run_id,
        tags={
            CHECKPOINT_TAG: result.checkpoint_dir,
            "audioscale.stage": "evaluate",
            "rankme_capped": str(result.rankme_capped).lower(),
        },
    )
    run.log_params(
        {
            "checkpoint_dir": result.checkpoint_dir,
            "model_name": result.model_name,
            "checkpoint_step": result.step,
            "tasks": sorted(result.task_scores),
            "tasks_dir": tasks_dir or "",
            "seeds": result.seeds,
            # How the checkpoint was read: its readout (and calibration set) and its input normalisation.
            **{key: getattr(result, key) for key in READOUT_AND_INPUT_KEYS},
            RANKME_N_KEY: result.rankme_n,
            RANKME_K_KEY: result.rankme_k,
            RANKME_POOL_KEY: result.rankme_pool,
            "task_rankme_n": result.task_rankme_n,
            # probe_schedule names the scene probe ("hear" | "appc" | "quick" | "linear" | "knn"); the other probe_* its values.
            **{f"probe_{key}": value for key, value in result.probe_protocol.items()},
            "lid_head": (result.lid_probe or {}).get("attention", "none"),
            **{f"lid_{key}": value for key, value in (result.lid_probe or {}).items() if key != "attention"},
            # Which probe produced each task's score: "mlp-<schedule>", "linear", "knn" or "lid-<attention>";
            # q_probe: all of them behind Q (compare Q only between runs with the same q_probe).
            "q_probe": result.q_probe,
            **{f"{task}/probe": score.get("probe", "") for task, score in result.task_scores.items()},
        }
    )
    run.log_metrics(evaluation_metrics(result), step=result.step)
    with tempfile.TemporaryDirectory(prefix="audioscale-eval-") as directory:
        for path in write_results(result, directory):
            run.log_artifact(path, artifact_path="evaluation")
    run.finish()
    if parent_run_id is not None:
        _log_on_pretraining_run(attach_run(uri, parent_run_id), result)
    return run.run_id


def _log_on_pretraining_run(parent: TrackedRun, result: EvaluationResult) -> None:
    """The headline numbers beside the training curves, with the pool that makes R comparable."""
    parent.log_metrics(
        {
            EVAL_Q_METRIC: result.q,
            LEGACY_EVAL_RANKME_METRIC: result.rankme,
            EVAL_RANKME_N_METRIC: result.rankme_n,
            "eval_rankme_k": result.rankme_k,
        },
        step=result.step,
    )
    parent.set_tags({EVAL_RANKME_POOL_TAG: result.rankme_pool, EVAL_RANKME_CAPPED_TAG: result.rankme_capped})
