"""A few optimizer steps of a debug model through the pretraining worker's own step, without Ray.

`train_steps` builds what `pipeline.pretrain.loop.build_training` builds (seeded model, unused
parameters frozen, AdamW with its schedule, optionally `torch.compile`; `benchmarks.acceptance.training`,
shared with the GPU acceptance run) and runs what `run_steps`
runs per step (`forward_backward`, `optimizer.step`, `scheduler.step`) on one fixed random batch
shaped like log-mel crops. Two calls that differ in one setting see the same weights, batch and
masks, so their losses differ only by that setting's numerics.
"""

from __future__ import annotations

import dataclasses
import itertools

import pytest
import torch
from torch import nn

from benchmarks.acceptance import training
from pipeline.pretrain.step import forward_backward

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
    run = training.build(model_name, CPU, global_batch=BATCH_SIZE, steps=steps, precision=precision,
                         fused_adamw=fused_adamw, compile_backend=compile_backend, peak_lr=PEAK_LR,
                         overrides=model_overrides)  # fmt: skip
    model, optimizer, scheduler = run.model, run.optimizer, run.scheduler
    dtypes: set[torch.dtype] = set()
    if compile_backend is None:  # a hook would only break the compiled graph
        for module in model.modules():
            if isinstance(module, nn.Linear):
                module.register_forward_hook(lambda _module, _inputs, output: dtypes.add(output.dtype))
    train_model = run.train_model
    batches = itertools.repeat(fixed_log_mel_batch(model))
    torch.manual_seed(1)  # the masking stream, the same for every setting
    losses, grad_norms = [], []
    for step in range(1, steps + 1):
        loss, grad_norm = forward_backward(
            train_model, batches, config=run.config, step=step, device=CPU, rank=0, node_id="test"
        )
        optimizer.step()
        scheduler.step()
        losses.append(float(loss))
        grad_norms.append(float(grad_norm))
    return StepsRun(losses=losses, grad_norms=grad_norms, model=model, linear_output_dtypes=dtypes)
