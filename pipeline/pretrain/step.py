"""One optimizer step's gradients on a worker, in plain PyTorch (no Ray): accumulation, DDP sync,
autocast, clipping, and the cross-rank check for a non-finite loss.

Conventions: one step = `accumulation_steps` micro-batches per worker; DDP all-reduces gradients
once, on the last micro-batch. The returned loss is the mean over this worker's micro-batches.
"""

from __future__ import annotations

import contextlib
import math

import torch
import torch.distributed as dist
from torch import nn

from pipeline.checkpoint import unwrap_model
from pipeline.pretrain import debug_hooks
from pipeline.pretrain.config import PretrainConfig


def autocast_for(device: torch.device, precision: str | None) -> contextlib.AbstractContextManager:
    """The forward pass's autocast: bf16 on the device's own autocast, or none for fp32.

    `precision` None means bf16 on GPU and fp32 on CPU. CPU stays fp32 by default because CPUs
    without native bf16 matmuls (no AVX512-BF16 / AMX, e.g. the AMD EPYC the tests run on) emulate
    them and run a step slower than fp32, and because the CPU runs (tests, the cpu_default study)
    were all recorded in fp32; `--precision bf16` on CPU is there to exercise the GPU's numerics.
    """
    chosen = precision or ("bf16" if device.type == "cuda" else "fp32")
    if chosen == "fp32":
        return contextlib.nullcontext()
    return torch.autocast(device_type=device.type, dtype=torch.bfloat16)


def freeze_parameters_without_gradients(model: nn.Module, *, crop_frames: int, device: torch.device) -> list[str]:
    """Freeze parameters that one forward/backward pass leaves without a gradient; return their names.

    Some published architectures keep modules they never call (AudioMAE++'s third LayerNorm,
    kept for the paper's parameter count). DDP would wait for their gradients forever; frozen,
    they are ignored by DDP and the optimizer, which is what training did to them anyway.
    """
    probe = torch.randn(2, crop_frames, model.spec.n_mels, device=device)  # (batch, frames, n_mels)
    model(probe).loss.backward()
    unused = [name for name, p in model.named_parameters() if p.requires_grad and p.grad is None]
    for name, parameter in model.named_parameters():
        if name in unused:
            parameter.requires_grad_(False)
    model.zero_grad(set_to_none=True)
    return unused


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
    autocast = autocast_for(device, config.compute.precision)
    ddp = getattr(train_model, "_orig_mod", train_model)
    loss_sum = torch.zeros((), device=device)
    train_model.train()
    # Optimizers never clear gradients: without this, each step's gradient would carry every earlier
    # step's (already clipped) one, and the logged gradient norm with it.
    train_model.zero_grad(set_to_none=True)
    # A schedule inside the model (wav2vec 2.0's Gumbel temperature) counts optimizer updates, not
    # forwards: every micro-batch of update `step` (1-based) sees the value after step - 1 updates.
    scheduled = getattr(unwrap_model(train_model), "set_step", None)
    for index in range(accumulation):
        if scheduled is not None:
            scheduled(step - 1)
        mel = next(micro_batches)  # (micro, crop_frames, n_mels)
        debug_hooks.maybe_record_crops(mel, step=step, rank=rank, node_id=node_id)
        last = index == accumulation - 1
        # Gradients are all-reduced once per step, on the last micro-batch.
        sync = contextlib.nullcontext() if last or not hasattr(ddp, "no_sync") else ddp.no_sync()
        with sync:
            with autocast:
                loss = train_model(mel).loss
            loss = debug_hooks.maybe_poison_loss(loss, step=step)
            (loss / accumulation).backward()
        loss_sum += loss.detach().float()
    # --grad-clip-norm 0 (Dasheng's training clips nothing): an infinite bound measures the norm only.
    bound = config.optim.grad_clip_norm if config.optim.grad_clip_norm > 0 else math.inf
    grad_norm = torch.nn.utils.clip_grad_norm_(train_model.parameters(), bound)
    return loss_sum / accumulation, grad_norm


def seed_step(seed: int, *, rank: int, step: int) -> None:
    """Seed torch's generator from (run seed, rank, step): each rank's masks differ, and a run resumed at
    any step draws what an uninterrupted one draws there, with no generator state in the checkpoint."""
    torch.manual_seed((seed * 1_000_003 + rank * 10_007 + step * 7_919) % 2**63)


def reduce_step_outcome(
    loss: torch.Tensor, grad_norm: torch.Tensor, *, world_size: int, device: torch.device
) -> tuple[float, bool]:
    """(loss averaged over ranks, whether any rank saw a non-finite loss or gradient norm)."""
    non_finite = (~torch.isfinite(loss)) | (~torch.isfinite(grad_norm))
    outcome = torch.stack([torch.nan_to_num(loss, nan=0.0, posinf=0.0, neginf=0.0), non_finite.float()]).to(device)
    if world_size > 1:
        dist.all_reduce(outcome, op=dist.ReduceOp.SUM)
    return float(outcome[0]) / world_size, bool(outcome[1] > 0)
