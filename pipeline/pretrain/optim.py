"""Optimizer and learning-rate schedule for masked pretraining, as in MAE / AudioMAE++ / CrossMAE.

Rules (each one has a test in tests/pipeline/pretrain/test_optim.py):
- AdamW with betas (0.9, 0.95): the MAE recipe; the lower beta2 keeps large-batch ViT training stable.
- Weight decay (default 0.05) only on matrices: biases, normalisation scales, every other 1-D
  parameter, and the tokens a model names in `no_weight_decay_names()` (position, cls, mask) are
  left undecayed, because shrinking them towards zero has no regularising meaning.
- Peak lr = base_lr x global_batch / 256 x model.lr_scale (the linear scaling rule, times
  CrossMAE's gamma/p when the model decodes only part of the masked patches).
  A run may give its peak instead (`peak_lr`): the RankMe study states 3e-4 at batch 256 (App. B).
- Linear warmup from 0 to the peak, then a cosine decay to `min_lr_ratio` x peak (or a linear decay,
  wav2vec 2.0's and HuBERT's, or a constant lr: `lr_factor`).
- Betas, epsilon and whether anything is exempt from decay are the run's (PretrainConfig): the
  defaults are MAE's; the paper profile gives Dasheng's (sweeps.protocol.recipe).
- "adamw8bit" is bitsandbytes' AdamW8bit (the study's 8-bit AdamW, App. B) on GPU; where bitsandbytes
  or a GPU is missing it is plain AdamW and `optimizer_choice` says so, for the run to record.
"""

from __future__ import annotations

import importlib.util
import math

import torch
from torch import nn

ADAMW_BETAS = (0.9, 0.95)
DEFAULT_WEIGHT_DECAY = 0.05
REFERENCE_BATCH_SIZE = 256
LR_SCHEDULE_KINDS = ("cosine", "linear", "constant")

_NORM_TYPES = (
    nn.LayerNorm,
    nn.GroupNorm,
    nn.RMSNorm,
    nn.modules.batchnorm._BatchNorm,
    nn.modules.instancenorm._InstanceNorm,
)


def scaled_learning_rate(*, base_lr: float, global_batch_size: int, lr_scale: float = 1.0) -> float:
    """Peak lr by the linear scaling rule: base_lr x global_batch / 256 x lr_scale."""
    if base_lr <= 0 or global_batch_size <= 0 or lr_scale <= 0:
        raise ValueError(
            f"base_lr ({base_lr}), global_batch_size ({global_batch_size}) and lr_scale ({lr_scale}) "
            "must all be positive"
        )
    return base_lr * global_batch_size / REFERENCE_BATCH_SIZE * lr_scale


def _strip_wrapper_prefixes(name: str) -> str:
    """Parameter name as the bare model sees it (DDP adds `module.`, torch.compile `_orig_mod.`)."""
    for prefix in ("module.", "_orig_mod."):
        while name.startswith(prefix):
            name = name[len(prefix) :]
    return name


def _norm_parameter_ids(model: nn.Module) -> set[int]:
    return {
        id(param)
        for module in model.modules()
        if isinstance(module, _NORM_TYPES)
        for param in module.parameters(recurse=False)
    }


def split_weight_decay_groups(model: nn.Module) -> tuple[list[str], list[str]]:
    """Names of trainable parameters that get weight decay, and those that do not."""
    bare_model = getattr(model, "module", model)
    bare_model = getattr(bare_model, "_orig_mod", bare_model)
    named_exempt = set(bare_model.no_weight_decay_names()) if hasattr(bare_model, "no_weight_decay_names") else set()
    norm_ids = _norm_parameter_ids(model)
    decay, no_decay = [], []
    for name, param in model.named_parameters():
        if not param.requires_grad:
            continue
        exempt = (
            param.ndim <= 1  # biases, norm scales, gates: never decayed
            or name.endswith(".bias")
            or id(param) in norm_ids
            or _strip_wrapper_prefixes(name) in named_exempt
        )
        (no_decay if exempt else decay).append(name)
    return decay, no_decay


def optimizer_choice(requested: str, *, device_type: str) -> tuple[str, str]:
    """(optimizer used, a note for the run: empty when it is the one requested)."""
    if requested != "adamw8bit":
        return requested, ""
    if device_type != "cuda" or importlib.util.find_spec("bitsandbytes") is None:
        why = "no GPU" if device_type != "cuda" else "bitsandbytes is not installed"
        return "adamw", f"8-bit AdamW requested (the study's, App. B) but {why}: plain AdamW used instead"
    return "adamw8bit", ""


def build_optimizer(
    model: nn.Module,
    *,
    base_lr: float,
    global_batch_size: int,
    weight_decay: float = DEFAULT_WEIGHT_DECAY,
    fused: bool = False,
    peak_lr: float | None = None,
    optimizer: str = "adamw",
    betas: tuple[float, float] = ADAMW_BETAS,
    eps: float = 1e-8,
    decay_all: bool = False,
) -> torch.optim.Optimizer:
    """AdamW over two parameter groups (decayed / not; `decay_all`: one, every parameter decayed, as
    Dasheng's training), at the scaled peak lr, or `peak_lr` as given.

    `optimizer` "adamw8bit" must already be `optimizer_choice`'s answer (bitsandbytes present, GPU)."""
    bare_model = getattr(model, "module", model)
    bare_model = getattr(bare_model, "_orig_mod", bare_model)
    if peak_lr is None:
        peak_lr = scaled_learning_rate(
            base_lr=base_lr,
            global_batch_size=global_batch_size,
            lr_scale=float(getattr(bare_model, "lr_scale", 1.0)),
        )
    decay_names, no_decay_names = split_weight_decay_groups(model)
    if decay_all:
        decay_names, no_decay_names = decay_names + no_decay_names, []
    params = dict(model.named_parameters())
    groups = [
        {"params": [params[n] for n in decay_names], "weight_decay": weight_decay, "group_name": "decay"},
        {"params": [params[n] for n in no_decay_names], "weight_decay": 0.0, "group_name": "no_decay"},
    ]
    if optimizer == "adamw8bit":
        import bitsandbytes  # optional: present only where optimizer_choice found it

        return bitsandbytes.optim.AdamW8bit(groups, lr=peak_lr, betas=betas, eps=eps)
    # `fused` runs one kernel per step on GPU; it is not implemented for every CPU dtype.
    return torch.optim.AdamW(groups, lr=peak_lr, betas=betas, eps=eps, fused=fused or None)


def warmup_cosine_factor(step: int, *, warmup_steps: int, total_steps: int, min_lr_ratio: float = 0.0) -> float:
    """Multiplier of the peak lr at `step` (0-based): linear ramp, then cosine to `min_lr_ratio`."""
    if step < warmup_steps:
        # (step + 1) so that the very first update already moves the weights.
        return (step + 1) / warmup_steps
    # Counted like the warmup, so the last warmup step is the peak and the last step the floor.
    decay_steps = max(1, total_steps - warmup_steps)
    progress = min(1.0, (step - warmup_steps + 1) / decay_steps)
    return min_lr_ratio + (1.0 - min_lr_ratio) * 0.5 * (1.0 + math.cos(math.pi * progress))


def lr_factor(step: int, *, kind: str, warmup_steps: int, total_steps: int, min_lr_ratio: float = 0.0) -> float:
    """Multiplier of the peak lr at `step` (0-based) for a schedule `kind`: the same linear warmup,
    then cosine (MAE, Dasheng), linear (wav2vec 2.0 and HuBERT's polynomial decay of power 1) to
    `min_lr_ratio`, or constant."""
    if kind not in LR_SCHEDULE_KINDS:
        raise ValueError(f"unknown lr schedule {kind!r}; choose one of {', '.join(LR_SCHEDULE_KINDS)}")
    if kind == "cosine" or step < warmup_steps:
        return warmup_cosine_factor(step, warmup_steps=warmup_steps, total_steps=total_steps, min_lr_ratio=min_lr_ratio)
    if kind == "constant":
        return 1.0
    progress = min(1.0, (step - warmup_steps + 1) / max(1, total_steps - warmup_steps))
    return 1.0 - (1.0 - min_lr_ratio) * progress


def build_scheduler(
    optimizer: torch.optim.Optimizer,
    *,
    warmup_steps: int,
    total_steps: int,
    min_lr_ratio: float = 0.0,
    kind: str = "cosine",
) -> torch.optim.lr_scheduler.LambdaLR:
    """Per-step warmup + decay schedule (`lr_factor`); its state_dict holds plain numbers only (weights_only safe)."""
    if warmup_steps < 0 or total_steps <= 0:
        raise ValueError(f"need warmup_steps >= 0 and total_steps > 0, got {warmup_steps} and {total_steps}")
    if not 0.0 <= min_lr_ratio <= 1.0:
        raise ValueError(f"min_lr_ratio must be in [0, 1], got {min_lr_ratio}")

    lr_factor(
        0, kind=kind, warmup_steps=warmup_steps, total_steps=total_steps
    )  # an unknown kind fails here, not at step 1

    def factor(step: int) -> float:
        return lr_factor(step, kind=kind, warmup_steps=warmup_steps, total_steps=total_steps, min_lr_ratio=min_lr_ratio)

    return torch.optim.lr_scheduler.LambdaLR(optimizer, factor)
