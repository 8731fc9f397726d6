"""A Ray Train worker's training state before its first step: the Ray-free core
(`pipeline.pretrain.training_core`) restored from the run's newest checkpoint that verifies, then
wrapped for DDP (and compiled). Ray appears only through the Ray Train worker API
(`get_checkpoint`, `prepare_model`).
"""

from __future__ import annotations

import dataclasses

import ray.train
import ray.train.torch
import torch

from pipeline.pretrain.config import ResolvedPretrainConfig
from pipeline.pretrain.resume import resume_directory
from pipeline.pretrain.training_core import TrainingState, build_training_state


@dataclasses.dataclass(frozen=True, kw_only=True)
class WorkerPlace:
    """Where this worker sits in the Ray Train worker group."""

    rank: int
    world_size: int
    device: torch.device
    node_id: str


def build_training(config: ResolvedPretrainConfig, place: WorkerPlace) -> TrainingState:
    """Build the model and optimizer, load the latest checkpoint that verifies, wrap for DDP (and compile)."""
    checkpoint = ray.train.get_checkpoint()
    if checkpoint is None:
        state = build_training_state(config, place.device, rank=place.rank)
    else:
        with resume_directory(checkpoint) as directory:
            state = build_training_state(config, place.device, resume_from=directory, rank=place.rank)
    train_model = ray.train.torch.prepare_model(state.model) if place.world_size > 1 else state.model
    if config.compute.compile_model:
        train_model = torch.compile(train_model)
    return dataclasses.replace(state, train_model=train_model)
