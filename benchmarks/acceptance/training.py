"""The acceptance run's training: the Ray-free core of every pretraining run
(`pipeline.pretrain.training_core`: the seeded model, unused parameters frozen, AdamW and its
schedule, `take_step`), built from a few knobs and stepped on fixed or streamed batches. The loss
read back waits for the GPU, as the worker loop's cross-rank check does.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Iterator

import torch
from torch import nn

from pipeline.pretrain.config import PretrainConfig
from pipeline.pretrain.training_core import TrainingState, build_training_state, take_step

# Far above a small batch's scaled lr, so a few steps move the weights and the loss visibly.
CHECK_PEAK_LR = 1e-3


@dataclasses.dataclass
class Training:
    config: PretrainConfig
    state: TrainingState
    device: torch.device

    @property
    def model(self) -> nn.Module:  # the bare model
        return self.state.model


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
    warmup_steps: int = 1,
    seed: int | None = None,
) -> Training:
    """A seeded model and optimizer as a run builds them (plain AdamW, so GPUs with and without
    bitsandbytes compare alike); `precision` None is the product's default. `compile_backend`
    "inductor" is what `--compile` runs; "eager" captures the same graphs with dynamo and runs them
    eagerly (the CPU mode's quick stand-in; inductor on a CPU takes ~35 s per model, and
    tests/pipeline/pretrain/test_pretrain_gpu_paths.py compiles with it). `peak_lr` None and `seed` None
    are the product's own lr and seed."""
    config = PretrainConfig.from_flat(
        model_name=model_name, model_overrides=dict(overrides or {}), global_batch_size=global_batch,
        micro_batch_size=micro_batch, steps=steps, warmup_steps=warmup_steps, precision=precision, peak_lr=peak_lr,
        optimizer="adamw", **({} if seed is None else {"seed": seed}),
    )  # fmt: skip
    state = build_training_state(config, device, fused_adamw=fused_adamw)
    if compile_backend:
        state = dataclasses.replace(state, train_model=torch.compile(state.model, backend=compile_backend))
    return Training(config=config, state=state, device=device)


def random_log_mel(model: nn.Module, batch: int, device: torch.device, *, seed: int = 1) -> torch.Tensor:
    """(batch, crop_frames, n_mels) standard-normal values, the scale of normalised log-mel crops."""
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(batch, model.spec.crop_frames, model.spec.n_mels, generator=generator).to(device)


def repeated(batch: torch.Tensor) -> Iterator[torch.Tensor]:
    return itertools.repeat(batch)


def step(training: Training, micro_batches: Iterator[torch.Tensor], step_number: int) -> float:
    """One optimizer step (all its micro-batches); returns the mean loss (waits for the device). The
    masks are a function of the step, equal across settings compared step by step."""
    outcome = take_step(
        training.state, micro_batches, config=training.config, step=step_number, device=training.device,
        node_id="acceptance",
    )  # fmt: skip
    return outcome.mean_loss


def losses(training: Training, batch: torch.Tensor, steps: int) -> list[float]:
    """The loss of each of `steps` steps on one fixed batch."""
    micro_batches = repeated(batch)
    return [step(training, micro_batches, number) for number in range(1, steps + 1)]
