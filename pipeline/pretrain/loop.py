"""The per-worker pretraining loop: build, load checkpoint, loop, save. Reads top to bottom.

Ray appears only through the Ray Train worker API (`get_context`, `get_checkpoint`,
`get_dataset_shard`, `report`, `prepare_model`); everything else is plain PyTorch.

Conventions:
- `step` counts finished optimizer updates; a checkpoint written at step s resumes at update s + 1.
- One step = `accumulation_steps` micro-batches per worker; DDP syncs gradients on the last one.
- Every rank calls `ray.train.report` at the same steps (it is a barrier); only rank 0 attaches a
  checkpoint, computes RankMe and writes to MLflow.
- A non-finite loss or gradient norm on any rank stops every rank at the same step without an
  update; the driver turns the recorded step into a `NonFiniteLossError`. Returning instead of
  raising keeps Ray Train's failure handling from retrying a run that would diverge again.
"""

from __future__ import annotations

import contextlib
import math
import tempfile
import time
from typing import Any

import numpy as np
import ray.train
import ray.train.torch
import torch
import torch.distributed as dist
from torch import nn

import models
from pipeline.checkpoint import (
    capture_rng_state,
    load_model_weights,
    load_train_state,
    restore_rng_state,
    save_model_checkpoint,
    save_train_state,
)
from pipeline.pretrain import debug_hooks
from pipeline.pretrain.config import PretrainConfig
from pipeline.pretrain.data import iterate_micro_batches, load_rankme_crops
from pipeline.pretrain.optim import build_optimizer, build_scheduler
from pipeline.rankme import rankme
from pipeline.tracking import attach_run

RANKME_BATCH_CLIPS = 64
# Ray Train's Result only keeps metrics reported with a checkpoint, so rank 0 leaves the step of
# a non-finite loss as a tag on the MLflow run, which the driver reads after `fit`.
NON_FINITE_TAG = "audioscale.non_finite_loss_step"


def train_loop(config_dict: dict[str, Any]) -> None:
    """Ray Train worker entry point: `config_dict` is `PretrainConfig.resolved().to_dict()`."""
    config = PretrainConfig(**config_dict)
    context = ray.train.get_context()
    rank, world_size = context.get_world_rank(), context.get_world_size()
    torch.set_num_threads(max(1, int(config.cpus_per_worker or 1)))
    device = ray.train.torch.get_device()

    # Build: same seed on every rank, so the initial weights agree before DDP broadcasts them.
    torch.manual_seed(config.seed)
    model = models.build_model(config.model_name, **config.model_build_overrides()).to(device)
    frozen_names = freeze_parameters_without_gradients(model, device=device)
    optimizer = build_optimizer(
        model,
        base_lr=config.base_lr,
        global_batch_size=config.global_batch_size,
        weight_decay=config.weight_decay,
        fused=device.type == "cuda",
    )
    scheduler = build_scheduler(
        optimizer, warmup_steps=config.warmup_steps, total_steps=config.steps, min_lr_ratio=config.min_lr_ratio
    )

    # Load checkpoint.
    start_step = restore_training_state(model, optimizer, scheduler, config=config, rank=rank)
    train_model = ray.train.torch.prepare_model(model) if world_size > 1 else model
    if config.compile_model:
        train_model = torch.compile(train_model)
    tracker = attach_run(config.tracking_uri, config.mlflow_run_id) if rank == 0 else None
    rankme_crops = None
    if rank == 0:
        tracker.log_params({"frozen_unused_parameters": sorted(frozen_names)})
        tracker.log_metrics({"resumed_from_step": start_step}, step=start_step)
        if config.rankme_every_steps:
            rankme_crops = load_rankme_crops(config, crop_frames=model.spec.crop_frames)
    latest_rankme = None
    if rankme_crops is not None and start_step == 0:
        latest_rankme = measure_rankme(model, rankme_crops, device=device)
        tracker.log_metrics({"rankme": latest_rankme}, step=0)

    # Loop.
    micro_batches = iterate_micro_batches(
        ray.train.get_dataset_shard("train"),
        micro_batch_size=config.effective_micro_batch_size,
        device=device,
        shuffle_buffer_crops=config.shuffle_buffer_crops,
        seed=config.seed * 7919 + rank + start_step,
    )
    node_id = ray.get_runtime_context().get_node_id()
    window = ThroughputWindow()
    for step in range(start_step + 1, config.steps + 1):
        lr = optimizer.param_groups[0]["lr"]
        window.start_step()
        loss, grad_norm = forward_backward(
            train_model, micro_batches, config=config, step=step, device=device, rank=rank, node_id=node_id
        )
        mean_loss, non_finite = reduce_step_outcome(loss, grad_norm, world_size=world_size, device=device)
        if non_finite:
            # Stop everywhere without applying the update; the last checkpoint stays the good one.
            if tracker is not None:
                tracker.set_tags({NON_FINITE_TAG: step})
            return
        optimizer.step()
        scheduler.step()
        window.end_step(mean_loss, samples=config.global_batch_size)
        debug_hooks.maybe_crash(step=step, rank=rank)

        is_last = step == config.steps
        wants_rankme = rankme_crops is not None and (is_last or step % config.rankme_every_steps == 0)
        if wants_rankme:
            latest_rankme = measure_rankme(model, rankme_crops, device=device)
        if not (is_last or step % config.log_every_steps == 0 or step % config.checkpoint_every_steps == 0):
            continue
        metrics = {"step": step, "lr": lr, "grad_norm": float(grad_norm), **window.summary()}
        if tracker is not None:
            tracker.log_metrics({**metrics, **({"rankme": latest_rankme} if wants_rankme else {})}, step=step)
        if latest_rankme is not None:
            metrics["rankme"] = latest_rankme
        # Save.
        if is_last or step % config.checkpoint_every_steps == 0:
            report_with_checkpoint(metrics, model, optimizer, scheduler, config=config, step=step, rank=rank)
        else:
            ray.train.report(metrics)
    debug_hooks.maybe_record_weights(model, rank=rank)


def freeze_parameters_without_gradients(model: nn.Module, *, device: torch.device) -> list[str]:
    """Freeze parameters that one forward/backward pass leaves without a gradient; return their names.

    Some published architectures keep modules they never call (AudioMAE++'s third LayerNorm,
    kept for the paper's parameter count). DDP would wait for their gradients forever; frozen,
    they are ignored by DDP and the optimizer, which is what training did to them anyway.
    """
    spec = model.spec
    probe = torch.randn(2, spec.crop_frames, spec.n_mels, device=device)  # (batch, frames, n_mels)
    model(probe).loss.backward()
    unused = [name for name, p in model.named_parameters() if p.requires_grad and p.grad is None]
    for name, parameter in model.named_parameters():
        if name in unused:
            parameter.requires_grad_(False)
    model.zero_grad(set_to_none=True)
    return unused


def restore_training_state(
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    scheduler: torch.optim.lr_scheduler.LRScheduler,
    *,
    config: PretrainConfig,
    rank: int,
) -> int:
    """Load Ray Train's latest checkpoint if there is one; returns the step to continue from.

    Rank 0 gets its exact RNG state back; the other ranks reseed from (seed, rank, step), which
    keeps their masking streams distinct and reproducible without one RNG file per rank.
    """
    checkpoint = ray.train.get_checkpoint()
    start_step = 0
    rng_state = None
    if checkpoint is not None:
        with checkpoint.as_directory() as directory:
            load_model_weights(model, directory)
            state = load_train_state(directory)
        optimizer.load_state_dict(state["optimizer"])
        scheduler.load_state_dict(state["scheduler"])
        start_step, rng_state = int(state["step"]), state["rng"]
    if rank == 0 and rng_state is not None:
        restore_rng_state(rng_state)
    else:
        seed = config.seed * 1_000_003 + rank * 10_007 + start_step
        torch.manual_seed(seed)
        np.random.seed(seed % 2**32)
    return start_step


def forward_backward(
    train_model: nn.Module,
    micro_batches,
    *,
    config: PretrainConfig,
    step: int,
    device: torch.device,
    rank: int,
    node_id: str,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Gradients of one global batch; returns (mean local loss, gradient norm before clipping)."""
    accumulation = config.accumulation_steps
    autocast = (
        torch.autocast(device_type="cuda", dtype=torch.bfloat16) if device.type == "cuda" else contextlib.nullcontext()
    )
    ddp = getattr(train_model, "_orig_mod", train_model)
    loss_sum = torch.zeros((), device=device)
    train_model.train()
    for index in range(accumulation):
        mel = next(micro_batches)  # (micro, crop_frames, n_mels)
        debug_hooks.maybe_record_crops(mel, rank=rank, node_id=node_id)
        last = index == accumulation - 1
        # Gradients are all-reduced once per step, on the last micro-batch.
        sync = contextlib.nullcontext() if last or not hasattr(ddp, "no_sync") else ddp.no_sync()
        with sync:
            with autocast:
                loss = train_model(mel).loss
            loss = debug_hooks.maybe_poison_loss(loss, step=step)
            (loss / accumulation).backward()
        loss_sum += loss.detach().float()
    grad_norm = torch.nn.utils.clip_grad_norm_(train_model.parameters(), config.grad_clip_norm)
    return loss_sum / accumulation, grad_norm


def reduce_step_outcome(
    loss: torch.Tensor, grad_norm: torch.Tensor, *, world_size: int, device: torch.device
) -> tuple[float, bool]:
    """(loss averaged over ranks, whether any rank saw a non-finite loss or gradient norm)."""
    non_finite = (~torch.isfinite(loss)) | (~torch.isfinite(grad_norm))
    outcome = torch.stack([torch.nan_to_num(loss, nan=0.0, posinf=0.0, neginf=0.0), non_finite.float()]).to(device)
    if world_size > 1:
        dist.all_reduce(outcome, op=dist.ReduceOp.SUM)
    return float(outcome[0]) / world_size, bool(outcome[1] > 0)


@torch.no_grad()
def measure_rankme(model: nn.Module, crops: torch.Tensor, *, device: torch.device) -> float:
    """RankMe of scene embeddings (frame features averaged over time) of the held-out crops."""
    was_training = model.training
    model.eval()
    scene = []
    for start in range(0, len(crops), RANKME_BATCH_CLIPS):
        frames = model.embed(crops[start : start + RANKME_BATCH_CLIPS].to(device))  # (clips, frames, dim)
        scene.append(frames.float().mean(dim=1).cpu())  # (clips, dim)
    model.train(was_training)
    return rankme(torch.cat(scene))


def report_with_checkpoint(
    metrics: dict[str, Any],
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    scheduler: torch.optim.lr_scheduler.LRScheduler,
    *,
    config: PretrainConfig,
    step: int,
    rank: int,
) -> None:
    """Rank 0 writes the checkpoint directory; every rank reports (Ray Train's barrier)."""
    if rank != 0:
        ray.train.report(metrics)
        return
    with tempfile.TemporaryDirectory(prefix="audioscale-ckpt-") as directory:
        save_model_checkpoint(
            directory,
            model,
            model_name=config.model_name,
            overrides=config.model_build_overrides(),
            step=step,
            shard_fingerprint=config.shard_fingerprint or "",
            extra={"run_name": config.run_name, "pretrain_config": config.to_dict()},
        )
        save_train_state(
            directory, optimizer=optimizer, scheduler=scheduler, step=step, rng_state=capture_rng_state()
        )
        ray.train.report(
            metrics,
            checkpoint=ray.train.Checkpoint.from_directory(directory),
            checkpoint_dir_name=f"checkpoint_step_{step:08d}",
        )


class ThroughputWindow:
    """Metrics of the steps since the last summary.

    samples_per_s counts wall time (data waits, reports, checkpoints and RankMe included);
    step_time_s is the mean time of one step alone (data wait, forward, backward, update).
    """

    def __init__(self) -> None:
        self._step_started = 0.0
        self._reset()

    def _reset(self) -> None:
        self._window_started = time.perf_counter()
        self._losses: list[float] = []
        self._samples = 0
        self._busy_s = 0.0

    def start_step(self) -> None:
        self._step_started = time.perf_counter()

    def end_step(self, loss: float, *, samples: int) -> None:
        self._busy_s += time.perf_counter() - self._step_started
        self._losses.append(loss)
        self._samples += samples

    def summary(self) -> dict[str, float]:
        wall_s = max(time.perf_counter() - self._window_started, 1e-9)
        result = {
            "loss": float(np.mean(self._losses)) if self._losses else math.nan,
            "samples_per_s": self._samples / wall_s,
            "step_time_s": self._busy_s / max(1, len(self._losses)),
        }
        self._reset()
        return result
