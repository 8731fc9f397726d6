"""`python -m pipeline.pretrain`: masked pretraining on Ray Train, tracked in MLflow.

    python -m pipeline.pretrain --model NAME --shards DIR --steps S --batch-size B --num-workers W
        [--use-gpu] [--lr] [--mask-ratio] [--run-name] [--storage-path] [--tracking-uri]
        [--experiment] [--address] ...      (--help lists every option with its default)
    ray job submit --working-dir . -- python -m pipeline.pretrain ...
    python -m pipeline.pretrain             (no arguments: the embedded CPU default)

The driver builds the TorchTrainer; the per-worker loop is `pipeline.pretrain.loop.train_loop`.
Running again with the same --run-name (and storage path) resumes from the run's last checkpoint
and appends to the same MLflow run; worker crashes are retried up to --max-failures times, each
time from the last checkpoint.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import ray
import safetensors.torch
from ray.train import CheckpointConfig, FailureConfig, RunConfig, ScalingConfig
from ray.train.torch import TorchTrainer

from pipeline.checkpoint import META_FILE, WEIGHTS_FILE, read_checkpoint_meta
from pipeline.cli.errors import UserError, one_line
from pipeline.pretrain import debug_hooks
from pipeline.pretrain.config import PretrainConfig, ResolvedPretrainConfig
from pipeline.pretrain.data import check_shards_match_model
from pipeline.pretrain.discrete_targets import with_codebook
from pipeline.pretrain.health_checks import poll_workers_often
from pipeline.pretrain.loop import NON_FINITE_TAG, is_checkpoint_step, train_loop
from pipeline.pretrain.loopback_backend import LoopbackTorchConfig
from pipeline.pretrain.model_facts import ModelFacts
from pipeline.pretrain.out_of_space import out_of_space_message, ran_out_of_space
from pipeline.pretrain.preemption import PREEMPTION_CHECKPOINT_METRIC
from pipeline.pretrain.resources import check_workers_fit
from pipeline.pretrain.resume import announce_resume_point
from pipeline.pretrain.resume_check import check_resume
from pipeline.pretrain.store_outage import is_store_outage, prune_checkpoints, wait_for_store
from pipeline.pretrain.stored_checkpoints import as_uri, missing_files
from pipeline.session.ray_session import connect_ray
from pipeline.shards.crops import check_segments_fit_crop
from pipeline.shards.format import MANIFEST_NAME, read_manifest
from pipeline.storage.bucket_check import check_bucket
from pipeline.storage.paths import default_ray_storage_dir, shards_dir_for
from pipeline.storage.writable import check_free_space, check_writable_dir, nearest_existing
from pipeline.tracking.dataset import log_shards_input
from pipeline.tracking.keys import RANKME_METRIC, TRAIN_STEPS_PARAM
from pipeline.tracking.lifecycle import killed_on_interrupt
from pipeline.tracking.runs import (
    CODE_VERSION_ENV,
    checked_store,
    code_version,
    read_run,
    start_or_resume_run,
)

__all__ = ["NonFiniteLossError", "PretrainConfig", "PretrainResult", "run_pretraining", "train_loop"]


class NonFiniteLossError(RuntimeError):
    """Training produced a NaN/inf loss or gradient; the last good checkpoint is kept."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class PretrainResult:
    run_name: str
    run_id: str  # MLflow run id
    tracking_uri: str
    checkpoint_dir: str  # the final checkpoint (a local path, or a URI on cloud storage)
    steps: int  # optimizer steps the checkpoint has been trained for
    final_loss: float
    rankme_history: list[tuple[int, float]]  # (step, RankMe) over the whole run, resumes included
    # (step, path) of every checkpoint storage holds, by step: with --checkpoint-steps, each of those steps.
    checkpoints: tuple[tuple[int, str], ...] = ()
    encoder_parameters: int
    total_parameters: int


def run_pretraining(
    config: PretrainConfig, *, model: ModelFacts | None = None, run_callbacks: Sequence[Any] = ()
) -> PretrainResult:
    """Pretrain one model on Ray Train; raises NonFiniteLossError or ray.train.TrainingFailedError.

    `model`: `config.describe_model()` when the caller already has it (a study trial), so the model
    is described once. `run_callbacks` go into the trainer's RunConfig (e.g. Tune's
    TuneReportCallback in a study trial)."""
    # Everything a user can get wrong is checked before Ray starts: the model, its overrides, the shards.
    model = model or config.describe_model()
    checked_store(config.tracking.tracking_uri)  # a tracking server that is not there: one line in seconds
    storage = config.checkpoint.storage_path or str(default_ray_storage_dir())
    if "://" not in storage:
        check_writable_dir(storage, what="--storage-path")
    check_bucket(storage, what="--storage-path", write=True)  # a bucket: its credentials, existence, policy
    shards_dir = config.data.shards_dir or str(shards_dir_for(preset_name=model.spec.frontend_preset, max_hours=None))
    check_bucket(shards_dir, what="--shards", write=False)
    manifest = _read_manifest_naming_it(shards_dir)
    check_shards_match_model(shards_dir, manifest, model.spec)
    config, model = with_codebook(config, model, shards_dir)  # HuBERT's k-means targets, fitted or reused
    started_ray = connect_ray(config.compute.ray_address)
    try:
        warmup_given = config.schedule.warmup_steps is not None
        config = config.resolved(
            cluster_cpus=ray.cluster_resources().get("CPU"), model=model, shard_fingerprint=manifest["fingerprint"]
        )
        config, allowed_changes = check_resume(config, warmup_given=warmup_given)
        check_storage_room(config, model)
        announce_resume_point(
            config.checkpoint.storage_path, config.tracking.run_name, say=lambda line: print(line, file=sys.stderr)
        )
        # Before the MLflow run and the workers: checks the part files' digests, then the crop lengths.
        check_segments_fit_crop(config.data.shards_dir, crop_frames=config.model.crop_frames)
        if started_ray:  # a cluster may grow (autoscaling); a local Ray started here cannot
            check_workers_fit(
                config.compute.num_workers, config.compute.cpus_per_worker, ray.cluster_resources().get("CPU", 0.0)
            )
        return _run_on_ray(config, model, manifest, run_callbacks, allowed_changes)
    finally:
        if started_ray:
            ray.shutdown()


def _run_on_ray(
    config: ResolvedPretrainConfig,
    model: ModelFacts,
    manifest: dict[str, Any],
    run_callbacks: Sequence[Any],
    allowed_changes: dict[str, str],
) -> PretrainResult:
    run = start_or_resume_run(
        tracking_uri=config.tracking.tracking_uri,
        experiment_name=config.tracking.experiment_name,
        run_name=config.tracking.run_name,
        parent_run_id=config.tracking.parent_run_id,
    )
    config = config.replace(mlflow_run_id=run.run_id)
    run.log_params(
        {
            **{k: v for k, v in config.to_dict().items() if k not in ("mlflow_run_id", "parent_run_id")},
            "code_version": code_version(),
            "shard_total_hours": manifest["total_hours"],
            "shard_num_rows": manifest["num_rows"],
            "accumulation_steps": config.accumulation_steps,
            TRAIN_STEPS_PARAM: config.training.steps,  # the planned horizon (sweeps.record reads it)
            **model.mlflow_params(),
        }
    )
    log_shards_input(run, shards_dir=config.data.shards_dir, fingerprint=manifest["fingerprint"])
    run.delete_tag(NON_FINITE_TAG)  # left by an earlier attempt of this run
    if allowed_changes:  # the resume's --allow-changed settings, so the run says they changed mid-way
        run.set_tags({"resume_allowed_changes": "; ".join(f"{k} {v}" for k, v in allowed_changes.items())})
    try:
        result = _fit_riding_out_store_outages(config, run, run_callbacks)
    except Exception as error:
        run.finish("FAILED")
        if "://" not in config.checkpoint.storage_path and ran_out_of_space(error):
            raise UserError(out_of_space_message(config.checkpoint.storage_path, config.tracking.run_name)) from error
        raise
    return _finish_run(run, result, config=config, model=model)


def _fit_riding_out_store_outages(
    config: ResolvedPretrainConfig, run, run_callbacks: Sequence[Any]
) -> ray.train.Result:
    """Ray Train's fit; when a storage bucket stopped answering ended it, wait for the bucket and fit again
    under the same run name, which resumes from the newest whole checkpoint (pipeline.pretrain.store_outage),
    at most --max-failures times. Afterwards the run keeps --keep-checkpoints, as an uninterrupted one does."""
    storage, resumes_left = config.checkpoint.storage_path, config.compute.max_failures
    resumed = False
    while True:
        try:
            with killed_on_interrupt(run):
                poll_workers_often()
                result = build_trainer(config, run_callbacks).fit()
            break
        except Exception as error:
            if "://" not in storage or resumes_left <= 0 or not is_store_outage(error):
                raise
            resumes_left -= 1
            say = lambda line: print(line, file=sys.stderr, flush=True)  # noqa: E731
            say(f"pretrain: the storage bucket stopped answering ({one_line(error)[:200]}); waiting for it (up to "
                f"{config.checkpoint.store_wait_s / 60:.0f} min), then resuming from the newest whole checkpoint")  # fmt: skip
            waited = wait_for_store(
                storage, limit_s=config.checkpoint.store_wait_s, last_step=run.last_step("loss"), say=say
            )
            used = config.compute.max_failures - resumes_left
            say(f"pretrain: the bucket answers again after {waited:.0f} s; resuming (resume {used} of --max-failures "
                f"{config.compute.max_failures})")  # fmt: skip
            announce_resume_point(storage, config.tracking.run_name, say=say)
            resumed = True
    if resumed and not config.checkpoint.checkpoint_steps:
        for path in prune_checkpoints(
            storage, config.tracking.run_name, keep=config.checkpoint.num_checkpoints_to_keep
        ):
            print(f"pretrain: removed {path}, beyond --keep-checkpoints after the resume", file=sys.stderr)
    return result


# A checkpoint holds float32 weights (4 bytes a parameter) and AdamW's two moments (8 more):
# mae-debug at width 128 (463,328 parameters) writes 1.86 MB + 3.76 MB.
CHECKPOINT_BYTES_PER_PARAMETER = 12


def check_storage_room(config: ResolvedPretrainConfig, model: ModelFacts) -> None:
    """Local storage must hold every checkpoint that can exist there at once, before any training step."""
    if "://" in config.checkpoint.storage_path:
        return
    at_once = checkpoints_at_once(config)
    each = CHECKPOINT_BYTES_PER_PARAMETER * model.total_parameters
    check_free_space(
        config.checkpoint.storage_path, at_once * each, what="--storage-path",
        why=f"this run has up to {at_once} checkpoint(s) of about {each / 1e6:.1f} MB on that disk at once",
    )  # fmt: skip


def checkpoints_at_once(config: ResolvedPretrainConfig) -> int:
    """The most checkpoints the storage's filesystem holds at one moment. Ray Train copies a new
    checkpoint in before it deletes the oldest kept one, so `--keep-checkpoints K` means K + 1 (a
    run on a 5 MB disk, counted as 2, failed at the third copy, minutes in); with `--checkpoint-steps`
    every one is kept. The worker writes each first into the system's temporary folder: one more
    when that is on the same filesystem."""
    kept = (
        len(config.checkpoint.checkpoint_steps)
        if config.checkpoint.checkpoint_steps
        else config.checkpoint.num_checkpoints_to_keep + 1
    )
    storage = nearest_existing(Path(config.checkpoint.storage_path).expanduser().absolute())
    same_disk = os.stat(storage).st_dev == os.stat(tempfile.gettempdir()).st_dev
    return kept + int(same_disk)


def _read_manifest_naming_it(shards_dir: str) -> dict[str, Any]:
    try:
        return read_manifest(shards_dir)
    except json.JSONDecodeError as error:
        raise UserError(
            f"{shards_dir}/{MANIFEST_NAME} is not valid JSON ({error}): it is truncated or damaged; "
            f"re-run python -m pipeline.prep --output {shards_dir} --overwrite"
        ) from error


def build_trainer(config: ResolvedPretrainConfig, run_callbacks: Sequence[Any]) -> TorchTrainer:
    """The TorchTrainer of a resolved config: workers, resources, storage, retries, checkpoints."""
    return TorchTrainer(
        train_loop,
        train_loop_config=config.to_dict(),
        # Workers on one machine meet through a file: nothing of theirs listens beyond loopback.
        torch_config=LoopbackTorchConfig(),
        scaling_config=ScalingConfig(
            num_workers=config.compute.num_workers,
            use_gpu=config.compute.use_gpu,
            resources_per_worker={
                "CPU": config.compute.cpus_per_worker,
                **({"GPU": 1} if config.compute.use_gpu else {}),
            },
            placement_strategy=config.compute.placement_strategy,
        ),
        run_config=RunConfig(
            name=config.tracking.run_name,
            storage_path=config.checkpoint.storage_path,
            # A node preemption (a drain with reason PREEMPTION, then the node's loss) is charged to
            # max_preemption_failures; a crash, or a node lost without a drain notice, to max_failures.
            failure_config=FailureConfig(
                max_failures=config.compute.max_failures, max_preemption_failures=config.compute.max_preemption_failures
            ),
            # --checkpoint-steps are the study's evaluation points: every checkpoint is kept.
            checkpoint_config=CheckpointConfig(
                num_to_keep=None if config.checkpoint.checkpoint_steps else config.checkpoint.num_checkpoints_to_keep
            ),
            callbacks=list(run_callbacks),
            worker_runtime_env={"env_vars": {CODE_VERSION_ENV: code_version(), **debug_hooks.forwarded_environment()}},
        ),
    )


def _finish_run(run, result: ray.train.Result, *, config: ResolvedPretrainConfig, model: ModelFacts) -> PretrainResult:
    """Close the MLflow run from Ray Train's result: FAILED with a clear error, or the final checkpoint."""
    bad_step = run.tags().get(NON_FINITE_TAG)
    if bad_step:
        run.set_tags({"failure": f"non-finite loss at step {bad_step}"})
        run.finish("FAILED")
        last_good = result.checkpoint.path if result.checkpoint else "none (no checkpoint was written before it)"
        raise NonFiniteLossError(
            f"pretraining run {config.tracking.run_name!r} stopped: the loss or gradient became non-finite at step "
            f"{bad_step}; the last good checkpoint is {last_good}. Lower --lr, raise --warmup-steps "
            "or check the shards, then re-run with the same --run-name to resume from that checkpoint."
        )
    if result.checkpoint is None:
        run.finish("FAILED")
        raise RuntimeError(f"pretraining run {config.tracking.run_name!r} finished without a checkpoint")
    lacking = missing_files(result.checkpoint.path, result.checkpoint.filesystem)
    if lacking:
        run.finish("FAILED")
        raise RuntimeError(
            f"pretraining run {config.tracking.run_name!r}: its final checkpoint {as_uri(result.checkpoint.path, config.checkpoint.storage_path)} "
            f"did not reach --storage-path whole ({', '.join(lacking)} missing: its upload failed). Re-run with the "
            "same --run-name: it resumes from the newest whole checkpoint."
        )
    with result.checkpoint.as_directory() as checkpoint_dir:
        steps = int(read_checkpoint_meta(checkpoint_dir)["step"])
        log_encoder_artifact(run, checkpoint_dir)
    run.finish()
    history = read_run(config.tracking.tracking_uri, run.run_id)["metrics"]
    return PretrainResult(
        run_name=config.tracking.run_name,
        run_id=run.run_id,
        tracking_uri=config.tracking.tracking_uri,
        checkpoint_dir=as_uri(result.checkpoint.path, config.checkpoint.storage_path),
        steps=steps,
        final_loss=history["loss"][-1][1] if history.get("loss") else float("nan"),
        rankme_history=sorted(dict(history.get(RANKME_METRIC, [])).items()),
        checkpoints=_study_checkpoints(result, config, final_step=steps),
        encoder_parameters=model.encoder_parameters,
        total_parameters=model.total_parameters,
    )


def _study_checkpoints(
    result: ray.train.Result, config: ResolvedPretrainConfig, final_step: int
) -> tuple[tuple[int, str], ...]:
    """(step, path) of the kept checkpoints, less those taken only for a preemption notice: resume
    points, not the study's evaluation points (--checkpoint-steps, --checkpoint-every, the last)."""
    kept = []
    for checkpoint, metrics in result.best_checkpoints:
        lacking = missing_files(checkpoint.path, checkpoint.filesystem)
        if lacking:  # an upload the store cut short, which Ray registered all the same
            print(
                f"pretrain: checkpoint {as_uri(checkpoint.path, config.checkpoint.storage_path)} did not reach --storage-path "
                f"whole ({', '.join(lacking)} missing: its upload failed); it is not evaluated or resumed from",
                file=sys.stderr,
            )
            continue
        kept.append((int(metrics["step"]), checkpoint.path, bool(metrics.get(PREEMPTION_CHECKPOINT_METRIC))))
    return tuple(
        sorted(
            (step, as_uri(path, config.checkpoint.storage_path))
            for step, path, preemption_only in kept
            if not preemption_only or step == final_step or is_checkpoint_step(config, step)
        )
    )


def log_encoder_artifact(run, checkpoint_dir: str | Path) -> None:
    """The encoder's weights (state_dict keys under `encoder.`) and model.json, as MLflow artifacts."""
    weights = safetensors.torch.load_file(Path(checkpoint_dir) / WEIGHTS_FILE)
    encoder = {key: value for key, value in weights.items() if key.startswith("encoder.")}
    with tempfile.TemporaryDirectory(prefix="audioscale-encoder-") as directory:
        safetensors.torch.save_file(encoder, Path(directory) / "encoder.safetensors")
        (Path(directory) / META_FILE).write_text((Path(checkpoint_dir) / META_FILE).read_text())
        run.log_artifact(Path(directory) / "encoder.safetensors", artifact_path="encoder")
        run.log_artifact(Path(directory) / META_FILE, artifact_path="encoder")
