"""A worker's training state before its first step: the model, optimizer and schedule, restored from the
run's newest checkpoint that verifies, wrapped for DDP (and compiled). Ray appears only through the
Ray Train worker API (`get_checkpoint`, `prepare_model`).
"""

from __future__ import annotations

import dataclasses

import ray.train
import ray.train.torch
import torch
from torch import nn

import models
from pipeline.checkpoint import load_model_weights, load_train_state, restore_rng_state
from pipeline.pretrain.config import PretrainConfig
from pipeline.pretrain.data import give_model_its_input_standardisation
from pipeline.pretrain.optim import build_optimizer, build_scheduler, optimizer_choice
from pipeline.pretrain.resume import resume_directory
from pipeline.pretrain.step import freeze_parameters_without_gradients


@dataclasses.dataclass(frozen=True, kw_only=True)
class WorkerPlace:
    """Where this worker sits in the Ray Train worker group."""

    rank: int
    world_size: int
    device: torch.device
    node_id: str


@dataclasses.dataclass(frozen=True, kw_only=True)
class WorkerTraining:
    """What a worker trains with, built (and restored from a checkpoint) before the first step."""

    model: nn.Module  # the bare model: checkpoints and RankMe
    train_model: nn.Module  # the one stepped: DDP-wrapped with several workers, maybe compiled
    optimizer: torch.optim.Optimizer
    scheduler: torch.optim.lr_scheduler.LRScheduler
    start_step: int  # the last finished step of the restored checkpoint; 0 without one
    saved_data_position: dict[str, int] | None  # where its data stream stood (None: no checkpoint, or an old one)
    frozen_parameter_names: list[str]
    optimizer_used: str  # "adamw8bit" or "adamw"
    optimizer_note: str  # why it is not the one asked for; empty when it is


def build_training(config: PretrainConfig, place: WorkerPlace) -> WorkerTraining:
    """Build the model and optimizer, load the latest checkpoint, wrap for DDP (and compile)."""
    # Same seed on every rank, so the initial weights agree before DDP broadcasts them.
    torch.manual_seed(config.seed)
    model = models.build_model(config.model_name, **config.model_build_overrides())
    give_model_its_input_standardisation(model, config.shards_dir)  # the raw-dB target of the study MAE
    model = model.to(place.device)
    frozen_names = freeze_parameters_without_gradients(model, crop_frames=config.crop_frames, device=place.device)
    optimizer_used, optimizer_note = optimizer_choice(config.optimizer, device_type=place.device.type)
    optimizer = build_optimizer(
        model,
        base_lr=config.base_lr,
        global_batch_size=config.global_batch_size,
        weight_decay=config.weight_decay,
        fused=place.device.type == "cuda",
        peak_lr=config.peak_lr,
        optimizer=optimizer_used,
        betas=config.adam_betas,
        eps=config.adam_eps,
        decay_all=config.decay_all_parameters,
    )
    scheduler = build_scheduler(
        optimizer, warmup_steps=config.warmup_steps, total_steps=config.steps, min_lr_ratio=config.min_lr_ratio,
        kind=config.lr_schedule,
    )  # fmt: skip
    start_step, saved_data_position = restore_training_state(
        model, optimizer, scheduler, config=config, rank=place.rank
    )
    train_model = ray.train.torch.prepare_model(model) if place.world_size > 1 else model
    if config.compile_model:
        train_model = torch.compile(train_model)
    return WorkerTraining(
        model=model, train_model=train_model, optimizer=optimizer, scheduler=scheduler, start_step=start_step,
        saved_data_position=saved_data_position,
        frozen_parameter_names=frozen_names, optimizer_used=optimizer_used, optimizer_note=optimizer_note,
    )  # fmt: skip


def restore_training_state(
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    scheduler: torch.optim.lr_scheduler.LRScheduler,
    *,
    config: PretrainConfig,
    rank: int,
) -> tuple[int, dict[str, int] | None]:
    """Load the newest checkpoint that verifies (`pipeline.pretrain.resume`); returns (the step to continue
    from, the data position it recorded). Torch's generator is reseeded at every step (`seed_step`), so
    masks need no saved state; rank 0 also gets its Python and NumPy generators back.
    """
    checkpoint = ray.train.get_checkpoint()
    if checkpoint is None:
        return 0, None
    with resume_directory(checkpoint) as directory:
        load_model_weights(model, directory)
        state = load_train_state(directory)
    optimizer.load_state_dict(state["optimizer"])
    scheduler.load_state_dict(state["scheduler"])
    if rank == 0:
        restore_rng_state(state["rng"])
    return int(state["step"]), state.get("data_position")
