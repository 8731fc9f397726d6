"""The training core without Ray: everything a pretraining run trains with, and its step.

`build_training_state` makes the seeded model (with its input standardisation), freezes the
parameters no loss reaches, builds AdamW and its schedule, and restores all of it from a
checkpoint folder; `take_step` is one optimizer step; `save_training_state` writes what a resume
reads back. The Ray Train worker (`pipeline.pretrain.worker_setup`, `pipeline.pretrain.loop`)
wraps these with DDP, Ray's checkpoints and its reports; the GPU acceptance script, the
benchmarks and the tests call them directly, so all of them step the same code.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch
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
from pipeline.pretrain.config import PretrainConfig
from pipeline.pretrain.data import give_model_its_input_standardisation, input_statistics_meta
from pipeline.pretrain.optim import build_optimizer, build_scheduler, optimizer_choice
from pipeline.pretrain.step import forward_backward, freeze_parameters_without_gradients, reduce_step_outcome, seed_step


@dataclasses.dataclass(frozen=True, kw_only=True)
class TrainingState:
    """What a run trains with, built (and restored from a checkpoint) before its first step."""

    model: nn.Module  # the bare model: checkpoints and RankMe
    train_model: nn.Module  # the one stepped: the model, or its DDP / compiled wrapper
    optimizer: torch.optim.Optimizer
    scheduler: torch.optim.lr_scheduler.LRScheduler
    start_step: int  # the last finished step of the restored checkpoint; 0 without one
    saved_data_position: dict[str, int] | None  # where its data stream stood (None: no checkpoint, or an old one)
    frozen_parameter_names: list[str]
    optimizer_used: str  # "adamw8bit" or "adamw"
    optimizer_note: str  # why it is not the one asked for; empty when it is
    # The crops' per-bin mean/std (`mel_mean`, `mel_std`), written into every checkpoint's model.json; empty
    # for presets standardised per clip or a run without shards.
    input_statistics: dict[str, Any] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class StepOutcome:
    mean_loss: float  # across ranks; NaN when non_finite
    grad_norm: float  # before clipping
    non_finite: bool  # True: the optimizer did not step (a NaN/inf loss or gradient on some rank)


def build_training_state(
    config: PretrainConfig,
    device: torch.device,
    *,
    resume_from: str | Path | None = None,
    rank: int = 0,
    fused_adamw: bool | None = None,
) -> TrainingState:
    """The model, optimizer and schedule of `config` on `device`, restored from the checkpoint folder
    `resume_from` when given. `fused_adamw` None: fused on CUDA, as a run takes it."""
    # Same seed on every rank, so the initial weights agree before DDP broadcasts them.
    torch.manual_seed(config.training.seed)
    model = models.build_model(config.model.model_name, **config.model_build_overrides())
    input_statistics = {}
    if config.data.shards_dir:
        input_statistics = input_statistics_meta(config.data.shards_dir)
        # The raw-dB target of the study MAE.
        give_model_its_input_standardisation(model, config.data.shards_dir, input_statistics)
    model = model.to(device)
    crop_frames = config.model.crop_frames or model.spec.crop_frames
    frozen_names = freeze_parameters_without_gradients(model, crop_frames=crop_frames, device=device)
    optimizer_used, optimizer_note = optimizer_choice(config.optim.optimizer, device_type=device.type)
    optimizer = build_optimizer(
        model,
        base_lr=config.optim.base_lr,
        global_batch_size=config.training.global_batch_size,
        weight_decay=config.optim.weight_decay,
        fused=device.type == "cuda" if fused_adamw is None else fused_adamw,
        peak_lr=config.optim.peak_lr,
        optimizer=optimizer_used,
        betas=config.optim.adam_betas,
        eps=config.optim.adam_eps,
        decay_all=config.optim.decay_all_parameters,
    )
    scheduler = build_scheduler(
        optimizer, warmup_steps=config.schedule.warmup_steps, total_steps=config.training.steps, min_lr_ratio=config.schedule.min_lr_ratio,
        kind=config.schedule.lr_schedule,
    )  # fmt: skip
    start_step, saved_data_position = 0, None
    if resume_from is not None:
        start_step, saved_data_position = restore_training_state(model, optimizer, scheduler, resume_from, rank=rank)
    return TrainingState(
        model=model, train_model=model, optimizer=optimizer, scheduler=scheduler, start_step=start_step,
        saved_data_position=saved_data_position, frozen_parameter_names=frozen_names,
        optimizer_used=optimizer_used, optimizer_note=optimizer_note, input_statistics=input_statistics,
    )  # fmt: skip


def restore_training_state(
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    scheduler: torch.optim.lr_scheduler.LRScheduler,
    directory: str | Path,
    *,
    rank: int,
) -> tuple[int, dict[str, int] | None]:
    """Load a checkpoint folder's weights, optimizer and schedule; returns (the step to continue from,
    the data position it recorded). Torch's generator is reseeded at every step (`seed_step`), so
    masks need no saved state; rank 0 also gets its Python and NumPy generators back."""
    load_model_weights(model, directory)
    state = load_train_state(directory)
    optimizer.load_state_dict(state["optimizer"])
    scheduler.load_state_dict(state["scheduler"])
    if rank == 0:
        restore_rng_state(state["rng"])
    return int(state["step"]), state.get("data_position")


def after_optimizer_step(model: nn.Module) -> None:
    """A model that keeps state beside its weights (an EMA teacher: models/mae/teacher_targets.py)
    updates it here, on every rank alike, once the weights it follows have changed."""
    hook = getattr(model, "after_optimizer_step", None)
    if hook is not None:
        hook()


def take_step(
    state: TrainingState,
    micro_batches: Iterator[torch.Tensor],
    *,
    config: PretrainConfig,
    step: int,
    device: torch.device,
    rank: int = 0,
    world_size: int = 1,
    node_id: str = "local",
) -> StepOutcome:
    """One optimizer step over a step's micro-batches; skipped (non_finite True) when any rank saw a
    non-finite loss or gradient, so no rank applies a poisoned update."""
    # Masks and dropout: a function of the step, so a resume repeats them.
    seed_step(config.training.seed, rank=rank, step=step)
    loss, grad_norm = forward_backward(
        state.train_model, micro_batches, config=config, step=step, device=device, rank=rank, node_id=node_id
    )
    mean_loss, non_finite = reduce_step_outcome(loss, grad_norm, world_size=world_size, device=device)
    if non_finite:  # the reduced loss counts a non-finite one as 0: NaN says so to a caller that reads it
        return StepOutcome(mean_loss=float("nan"), grad_norm=float(grad_norm), non_finite=True)
    state.optimizer.step()
    state.scheduler.step()
    after_optimizer_step(state.model)
    return StepOutcome(mean_loss=float(mean_loss), grad_norm=float(grad_norm), non_finite=False)


def save_training_state(
    directory: str | Path,
    state: TrainingState,
    *,
    config: PretrainConfig,
    step: int,
    data_position: dict[str, int] | None = None,
    extra_meta: dict[str, Any] | None = None,
) -> None:
    """Write a checkpoint folder that `build_training_state(resume_from=...)` continues from: the
    model's weights and facts (evaluation reads these alone) and the optimizer, schedule, generators
    and data position (only a resume reads these)."""
    save_model_checkpoint(
        directory,
        state.model,
        model_name=config.model.model_name,
        overrides=config.model_build_overrides(),
        step=step,
        shard_fingerprint=config.data.shard_fingerprint or "",
        # extra_meta: e.g. the R measured at this step (RankMeSchedule.checkpoint_meta).
        extra={
            "run_name": config.tracking.run_name,
            "pretrain_config": config.to_dict(),
            **state.input_statistics,
            **(extra_meta or {}),
        },
    )
    save_train_state(
        directory,
        optimizer=state.optimizer,
        scheduler=state.scheduler,
        step=step,
        rng_state=capture_rng_state(),
        data_position=data_position,  # pipeline.pretrain.data_position: where a resume starts reading
    )
