"""The per-worker pretraining loop: build, load checkpoint, loop, save. Reads top to bottom.

Ray appears only through the Ray Train worker API (`get_context`, `report`; `get_checkpoint` and
`prepare_model` in `worker_setup`); the build and the step are the Ray-free core
(`pipeline.pretrain.training_core`), and everything else is plain PyTorch. The data does not come through
Ray Data: each worker reads its own deterministic share (`pipeline.pretrain.data`), which is what
lets a resumed run see exactly the crops an uninterrupted one would.

Conventions:
- `step` counts finished optimizer updates; a checkpoint written at step s resumes at update s + 1.
- One step = `accumulation_steps` micro-batches per worker; DDP syncs gradients on the last one.
- Every rank calls `ray.train.report` at the same steps (checkpoint and RankMe steps: it is a barrier,
  and Ray Train takes one report per health check, see `report_step`); only rank 0 attaches a
  checkpoint, computes RankMe and writes to MLflow.
- A non-finite loss or gradient norm on any rank stops every rank at the same step without an
  update; the driver turns the recorded step into a `NonFiniteLossError`. Returning instead of
  raising keeps Ray Train's failure handling from retrying a run that would diverge again.
"""

from __future__ import annotations

from typing import Any

import ray.train
import ray.train.torch
import torch

from pipeline.pretrain import debug_hooks
from pipeline.pretrain.checkpoint_report import report_with_checkpoint
from pipeline.pretrain.config import ResolvedPretrainConfig
from pipeline.pretrain.data import (
    MicroBatches,
    load_validation_crops,
    rankme_pool,
    readout_calibration,
    training_stream_plan,
)
from pipeline.pretrain.data_position import position_record, resume_position
from pipeline.pretrain.preemption import PREEMPTION_CHECKPOINT_METRIC, PreemptionNotice
from pipeline.pretrain.training_core import TrainingState, take_step
from pipeline.pretrain.training_metrics import RankMeSchedule, ThroughputWindow
from pipeline.pretrain.validation import ValidationSchedule
from pipeline.pretrain.worker_setup import WorkerPlace, build_training
from pipeline.rankme.model_rankme import logged_rankme
from pipeline.shards.crop_stream import StreamPosition
from pipeline.tracking.keys import RANKME_METRIC
from pipeline.tracking.runs import TrackedRun, attach_run
from pipeline.tracking.system_metrics import node_system_metrics

# Ray Train's Result only keeps metrics reported with a checkpoint, so rank 0 leaves the step of
# a non-finite loss as a tag on the MLflow run, which the driver reads after `fit`.
NON_FINITE_TAG = "audioscale.non_finite_loss_step"


def train_loop(config_dict: dict[str, Any]) -> None:
    """Ray Train worker entry point: `config_dict` is `ResolvedPretrainConfig.to_dict()`."""
    config = ResolvedPretrainConfig.from_flat(**config_dict)
    context = ray.train.get_context()
    with node_system_metrics(  # the first worker on each node samples its CPU, memory and GPUs into the run
        config.tracking.tracking_uri, config.tracking.mlflow_run_id, every_s=config.tracking.system_metrics_every_s,
        world_rank=context.get_world_rank(), local_rank=context.get_local_rank(), node_rank=context.get_node_rank(),
    ):  # fmt: skip
        train_on_worker(config, context)


def train_on_worker(config: ResolvedPretrainConfig, context: Any) -> None:
    """One worker's whole job: build, load the checkpoint, train, report (context: Ray Train's)."""
    torch.set_num_threads(max(1, int(config.compute.cpus_per_worker or 1)))
    place = WorkerPlace(
        rank=context.get_world_rank(), world_size=context.get_world_size(), device=ray.train.torch.get_device(),
        node_id=ray.get_runtime_context().get_node_id(),
    )  # fmt: skip
    training = build_training(config, place)
    tracker = attach_run(config.tracking.tracking_uri, config.tracking.mlflow_run_id) if place.rank == 0 else None
    wants_rankme = place.rank == 0 and (config.rankme.rankme_every_steps > 0 or bool(config.rankme.rankme_steps))
    rankme = RankMeSchedule(
        rankme_pool(config) if wants_rankme else None, every_steps=config.rankme.rankme_every_steps,
        steps=config.rankme.rankme_steps, last_step=config.training.steps, device=place.device,
        calibration=readout_calibration(config) if wants_rankme else None,
    )  # fmt: skip
    validation = ValidationSchedule(
        load_validation_crops(config) if place.rank == 0 and config.validation.validation_every_steps > 0 else None,
        every_steps=config.validation.validation_every_steps,
        patience=config.validation.validation_patience,
        tolerance=config.validation.validation_tolerance,
        device=place.device,
    )
    if tracker is not None:
        tracker.log_params({"frozen_unused_parameters": sorted(training.frozen_parameter_names)})
        tracker.set_tags({"optimizer_used": training.optimizer_used, "optimizer_note": training.optimizer_note})
        # A restart before the first checkpoint starts again at step 0: each step is logged once.
        if training.start_step > tracker.last_step("resumed_from_step"):
            tracker.log_metrics({"resumed_from_step": training.start_step}, step=training.start_step)
        initial = rankme.measure_if_due(training.model, 0) if training.start_step == 0 else None
        if initial is not None and tracker.last_step(RANKME_METRIC) < 0:
            tracker.log_metrics({RANKME_METRIC: logged_rankme(initial)}, step=0)
            log_rankme_record(tracker, rankme)
    if training.start_step == 0 and 0 in config.checkpoint.checkpoint_steps:  # the initialisation, as a study point
        initial_metrics = {"step": 0, **({RANKME_METRIC: rankme.latest} if rankme.latest is not None else {})}
        report_with_checkpoint(
            initial_metrics,
            training,
            config=config,
            step=0,
            rank=place.rank,
            data_position=position_record(StreamPosition(), world_size=place.world_size),
            extra_meta=rankme.checkpoint_meta(0),
        )
    if run_steps(config, training, place, tracker, (rankme, validation)):
        debug_hooks.maybe_record_weights(training.model, rank=place.rank)


def run_steps(
    config: ResolvedPretrainConfig,
    training: TrainingState,
    place: WorkerPlace,
    tracker: TrackedRun | None,
    schedules: tuple[RankMeSchedule, ValidationSchedule],
) -> bool:
    """Steps start_step + 1 .. config.steps (fewer once converged); False when a non-finite loss stopped them."""
    plan = training_stream_plan(config, rank=place.rank, world_size=place.world_size)
    start = resume_position(
        training.saved_data_position, step=training.start_step, world_size=place.world_size,
        crops_per_step=config.training.global_batch_size // place.world_size, rows_per_epoch=plan.rows_per_epoch,
        say=print if place.rank == 0 else lambda _: None,
    )  # fmt: skip
    micro_batches = MicroBatches(
        plan, micro_batch_size=config.effective_micro_batch_size, window_rows=config.data.shuffle_buffer_crops,
        device=place.device, start=start,
    )  # fmt: skip
    try:
        return _run_steps(config, training, place, tracker, schedules, micro_batches)
    finally:
        micro_batches.close()


def _run_steps(
    config: ResolvedPretrainConfig, training, place, tracker, schedules, micro_batches: MicroBatches
) -> bool:
    rankme, validation = schedules
    window = ThroughputWindow()
    logged_up_to = tracker.last_step("loss") if tracker is not None else -1  # a restart replays logged steps
    preemption = PreemptionNotice()
    for step in range(training.start_step + 1, config.training.steps + 1):
        lr = training.optimizer.param_groups[0]["lr"]
        window.start_step()
        outcome = take_step(
            training, micro_batches, config=config, step=step, device=place.device, rank=place.rank,
            world_size=place.world_size, node_id=place.node_id,
        )  # fmt: skip
        if outcome.non_finite:
            return _stopped_by_a_non_finite_loss(tracker, step)
        grad_norm = outcome.grad_norm
        window.end_step(outcome.mean_loss, samples=config.training.global_batch_size)
        debug_hooks.maybe_crash(step=step, rank=place.rank)
        debug_hooks.maybe_wait_for_preemption(step, rank=place.rank, node_id=place.node_id, noticed=preemption.poll)
        preempted = preemption.checkpoint_due(step)  # every rank at the same steps: the notice is a barrier
        measured = {RANKME_METRIC: rankme.measure_if_due(training.model, step)}
        measured["validation_mse"] = validation.check(training.model, step)
        stop = (
            validation.is_due(step)
            and config.validation.validation_stop
            and validation.agree_on_stop(world_size=place.world_size, device=place.device)
        )
        last = step == config.training.steps or stop
        if last or preempted or _is_log_step(config, step, rankme, validation):
            metrics = {"step": step, "lr": lr, "grad_norm": float(grad_norm), **window.summary()}
            if tracker is not None and step > logged_up_to:
                logged = {k: v for k, v in measured.items() if v is not None}
                if RANKME_METRIC in logged:  # the Tune report below keeps every digit (early stop ranks on it)
                    logged[RANKME_METRIC] = logged_rankme(logged[RANKME_METRIC])
                tracker.log_metrics({**metrics, **logged}, step=step)
                if measured[RANKME_METRIC] is not None:
                    log_rankme_record(tracker, rankme)
                if measured["validation_mse"] is not None:
                    tracker.set_tags(validation.tags())
            if rankme.latest is not None:
                metrics[RANKME_METRIC] = rankme.latest  # Tune's early stop reads the newest value
            if preempted:  # after the MLflow log: a mark for the driver, not a training metric
                metrics[PREEMPTION_CHECKPOINT_METRIC] = 1
            data_position = position_record(micro_batches.position, world_size=place.world_size)
            report_step(
                metrics, training, config=config, step=step, rank=place.rank, last=last or preempted,
                rankme_due=rankme.is_due(step) or follows_checkpoint(config, step), data_position=data_position,
                extra_meta=rankme.checkpoint_meta(step),
            )  # fmt: skip
            if preempted:
                debug_hooks.maybe_hold_after_preemption_checkpoint()
        elif follows_checkpoint(config, step):  # not a log step: report only (see report_step), log nothing
            ray.train.report({"step": step})
        if stop:
            break
    return True


def _stopped_by_a_non_finite_loss(tracker: TrackedRun | None, step: int) -> bool:
    """Stop everywhere without applying the update (the last checkpoint stays the good one); False."""
    if tracker is not None:
        tracker.set_tags({NON_FINITE_TAG: step})
    return False


def _is_log_step(config: ResolvedPretrainConfig, step: int, rankme: RankMeSchedule, validation) -> bool:
    """A step whose metrics are logged and reported: RankMe, validation, checkpoint or the log cadence."""
    return (
        rankme.is_due(step)
        or validation.is_due(step)
        or step % config.tracking.log_every_steps == 0
        or is_checkpoint_step(config, step)
    )


def log_rankme_record(tracker: TrackedRun, rankme: RankMeSchedule) -> None:
    """N, K and the pool beside the `rankme` metric (params: equal on every re-log), capped as a tag."""
    record = rankme.latest_record.record()
    tracker.set_tags({"rankme_capped": record.pop("rankme_capped")})
    tracker.log_params(record)


def is_checkpoint_step(config: ResolvedPretrainConfig, step: int) -> bool:
    return step % config.checkpoint.checkpoint_every_steps == 0 or step in config.checkpoint.checkpoint_steps


def follows_checkpoint(config: ResolvedPretrainConfig, step: int) -> bool:
    """The step after a checkpoint (the initialisation's included when it is one): see `report_step`."""
    return (step > 1 and is_checkpoint_step(config, step - 1)) or (
        step == 1 and 0 in config.checkpoint.checkpoint_steps
    )


def report_step(
    metrics: dict[str, Any],
    training: TrainingState,
    *,
    config: ResolvedPretrainConfig,
    step: int,
    rank: int,
    last: bool,
    rankme_due: bool,
    data_position: dict[str, int],
    extra_meta: dict[str, Any] | None = None,
) -> None:
    """Report to Ray Train (every rank at the same steps: it is a barrier) with a checkpoint at checkpoint
    steps and when `last` (the last step, or a preemption notice), and without one at RankMe steps (a
    study's Tune scheduler reads `rankme`) and at the step after a checkpoint: that report waits until
    Ray Train has taken the checkpoint's (the queue holds one), so a crash right after a checkpoint
    still resumes from it. Not at every log step: the metrics are in MLflow already,
    and Ray Train 2.60 takes one report per worker per health check (a queue of size 1, polled every
    RAY_TRAIN_HEALTH_CHECK_INTERVAL_S: Ray's 2 s, 0.5 s as `health_checks` sets it), so reporting every
    10 steps of 18 ms at 2 s held each report for 1.8 s and cut mae-debug from ~850 to 80 samples/s
    (docs/performance.md)."""
    if last or is_checkpoint_step(config, step):
        report_with_checkpoint(
            metrics, training, config=config, step=step, rank=rank, data_position=data_position, extra_meta=extra_meta
        )
    elif rankme_due:
        ray.train.report(metrics)
