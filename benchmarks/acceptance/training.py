"""The pretraining worker's step outside Ray: what `pipeline.pretrain.worker_setup.build_training`
builds (seeded model on the device, unused parameters frozen, AdamW and its schedule, optionally
compiled) and what the worker loop runs per step (`forward_backward`, `optimizer.step`,
`scheduler.step`, the loss read back, which waits for the GPU as the loop's cross-rank check does).
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Iterator

import torch
from torch import nn

import models
from pipeline.pretrain.config import PretrainConfig
from pipeline.pretrain.optim import build_optimizer, build_scheduler
from pipeline.pretrain.step import forward_backward, freeze_parameters_without_gradients, seed_step

# Far above a small batch's scaled lr, so a few steps move the weights and the loss visibly.
CHECK_PEAK_LR = 1e-3


@dataclasses.dataclass
class Training:
    config: PretrainConfig
    model: nn.Module  # the bare model
    train_model: nn.Module  # the model, or its compiled wrapper
    optimizer: torch.optim.Optimizer
    scheduler: torch.optim.lr_scheduler.LRScheduler
    device: torch.device


def build(
    model_name: str,
    device: torch.device,
    *,
    global_batch: int,
    micro_batch: int | None = None,
    steps: int = 10,
    precision: str | None = None,
    fused_adamw: bool = False,
    compile_backend: str | None = None,
    peak_lr: float | None = CHECK_PEAK_LR,
    overrides: dict | None = None,
) -> Training:
    """A seeded model and optimizer as the worker builds them; `precision` None is the product's default.
    `compile_backend` "inductor" is what `--compile` runs; "eager" captures the same graphs with dynamo
    and runs them eagerly (the CPU mode's quick stand-in; inductor on a CPU takes ~35 s per model, and
    tests/pipeline/pretrain/test_pretrain_gpu_paths.py compiles with it)."""
    overrides = dict(overrides or {})
    config = PretrainConfig(
        model_name=model_name, model_overrides=overrides, global_batch_size=global_batch,
        micro_batch_size=micro_batch, steps=steps, warmup_steps=1, precision=precision,
    )  # fmt: skip
    torch.manual_seed(0)
    model = models.build_model(model_name, **overrides).to(device)
    freeze_parameters_without_gradients(model, crop_frames=model.spec.crop_frames, device=device)
    optimizer = build_optimizer(model, base_lr=config.base_lr, global_batch_size=global_batch, peak_lr=peak_lr,
                                fused=fused_adamw)  # fmt: skip
    scheduler = build_scheduler(optimizer, warmup_steps=1, total_steps=steps)
    train_model = torch.compile(model, backend=compile_backend) if compile_backend else model
    return Training(config=config, model=model, train_model=train_model, optimizer=optimizer,
                    scheduler=scheduler, device=device)  # fmt: skip


def random_log_mel(model: nn.Module, batch: int, device: torch.device, *, seed: int = 1) -> torch.Tensor:
    """(batch, crop_frames, n_mels) standard-normal values, the scale of normalised log-mel crops."""
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(batch, model.spec.crop_frames, model.spec.n_mels, generator=generator).to(device)


def repeated(batch: torch.Tensor) -> Iterator[torch.Tensor]:
    return itertools.repeat(batch)


def step(training: Training, micro_batches: Iterator[torch.Tensor], step_number: int) -> float:
    """One optimizer step (all its micro-batches); returns the mean loss (waits for the device)."""
    seed_step(0, rank=0, step=step_number)  # the masks: equal across settings compared step by step
    loss, _grad_norm = forward_backward(
        training.train_model, micro_batches, config=training.config, step=step_number, device=training.device,
        rank=0, node_id="acceptance",
    )  # fmt: skip
    training.optimizer.step()
    training.scheduler.step()
    return float(loss)


def losses(training: Training, batch: torch.Tensor, steps: int) -> list[float]:
    """The loss of each of `steps` steps on one fixed batch."""
    micro_batches = repeated(batch)
    return [step(training, micro_batches, number) for number in range(1, steps + 1)]
