"""A few optimizer steps of a debug model through the training core every run steps, without Ray.

`train_steps` builds with `pipeline.pretrain.training_core.build_training_state` (what the Ray
Train worker wraps: seeded model, unused parameters frozen, AdamW with its schedule), optionally
compiles it, and runs `take_step` on one fixed random batch shaped like log-mel crops. Two calls
that differ in one setting see the same weights, batch and masks (a function of the step), so
their losses differ only by that setting's numerics.
"""

from __future__ import annotations

import dataclasses
import itertools

import pytest
import torch
from torch import nn

from pipeline.pretrain.config import PretrainConfig
from pipeline.pretrain.training_core import build_training_state, take_step

BATCH_SIZE = 4
# Far above the batch-4 scaled lr (2.3e-6), so that five steps move the weights and the loss visibly.
PEAK_LR = 1e-3
CPU = torch.device("cpu")


@dataclasses.dataclass
class StepsRun:
    losses: list[float]  # the step's mean loss, one per step
    grad_norms: list[float]  # before clipping
    model: nn.Module  # the bare model after the last step
    linear_output_dtypes: set[torch.dtype]  # of every nn.Linear output during the steps (eager runs only)


@pytest.fixture
def one_torch_thread():
    """Steady step timings and results when other work shares the cores (use with autouse below)."""
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)


def fixed_log_mel_batch(model: nn.Module, *, seed: int = 1) -> torch.Tensor:
    """(BATCH_SIZE, crop_frames, n_mels) standard-normal values, the scale of clip-normalised log-mel."""
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(BATCH_SIZE, model.spec.crop_frames, model.spec.n_mels, generator=generator)


def train_steps(
    model_name: str,
    *,
    steps: int,
    precision: str | None = None,
    fused_adamw: bool = False,
    compile_backend: str | None = None,
    **model_overrides,
) -> StepsRun:
    """`steps` optimizer steps of `model_name` (with `model_overrides`) on CPU with the worker's step function."""
    config = PretrainConfig.from_flat(
        model_name=model_name, model_overrides=model_overrides, global_batch_size=BATCH_SIZE, steps=steps,
        warmup_steps=1, precision=precision, peak_lr=PEAK_LR, optimizer="adamw",
    )  # fmt: skip
    state = build_training_state(config, CPU, fused_adamw=fused_adamw)
    if compile_backend:
        state = dataclasses.replace(state, train_model=torch.compile(state.model, backend=compile_backend))
    dtypes: set[torch.dtype] = set()
    if compile_backend is None:  # a hook would only break the compiled graph
        for module in state.model.modules():
            if isinstance(module, nn.Linear):
                module.register_forward_hook(lambda _module, _inputs, output: dtypes.add(output.dtype))
    batches = itertools.repeat(fixed_log_mel_batch(state.model))
    outcomes = [take_step(state, batches, config=config, step=step, device=CPU) for step in range(1, steps + 1)]
    return StepsRun(
        losses=[outcome.mean_loss for outcome in outcomes], grad_norms=[outcome.grad_norm for outcome in outcomes],
        model=state.model, linear_output_dtypes=dtypes,
    )  # fmt: skip
