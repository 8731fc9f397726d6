"""Is training right on this device? Per model: bf16 autocast against fp32, the compiled model against
eager, fused AdamW against the default, no non-finite loss, and which SDPA kernel each part runs.

Every comparison starts from the same weights, batch and masks, so two loss curves differ only by
the setting compared. Tolerances are fixed here, before any GPU run, from what the setting changes:
- bf16 keeps 8 significant bits (relative rounding 2^-8 = 0.4% per value); a mean loss over thousands
  of values drifts far less at step 1, and a few lr-1e-3 steps may amplify it: 2% at step 1, 5% at any step.
- fused AdamW does the fp32 update arithmetic in another order: 0.1%.
- compiled vs eager at the same precision: fusion moves the rounding points; fp32 0.1%, bf16 as bf16 (2%).
In Adam's first steps a weight moves by about +-lr whatever its gradient's size, so a rounding-level change
in a near-zero gradient can flip a whole step: a miss here asks for benchmarks/precision_drift.py, which
compares where 60 steps at the product's lr end against the seed-to-seed spread.
Two things would make curves differ by chance rather than by the setting, so they are switched off here:
dropout (HuBERT's and wav2vec 2.0's 0.1: on a GPU the fp32 run's attention takes the memory-efficient
kernel and the bf16 run's flash, which draw different dropout masks and shift every later random draw),
and inductor's own random numbers (the masks drawn inside a compiled graph; `fallback_random` makes it
draw them as eager does).
"""

from __future__ import annotations

import dataclasses
import math

import torch
import torch._inductor.config

import models
from benchmarks.acceptance import measure, training
from pipeline.pretrain.step import autocast_for

BF16_STEP1_TOLERANCE = 0.02
BF16_ANY_STEP_TOLERANCE = 0.05
FUSED_TOLERANCE = 1e-3
COMPILED_FP32_TOLERANCE = 1e-3


def relative_gaps(curve: list[float], reference: list[float]) -> list[float]:
    return [abs(a - b) / max(abs(b), 1e-8) for a, b in zip(curve, reference)]


def without_dropout(name: str, overrides: dict) -> dict:
    """`overrides` with every dropout rate of the model's config (default or overridden) set to 0; the
    config comes from a build on the meta device (free)."""
    with torch.device("meta"):
        config = getattr(models.build_model(name), "config", None)
    rates = [field.name for field in dataclasses.fields(config)] if dataclasses.is_dataclass(config) else []
    active = [rate for rate in rates if "dropout" in rate and (getattr(config, rate) or overrides.get(rate))]
    return {**overrides, **{rate: 0.0 for rate in active}}


def _curve(
    name: str, device: torch.device, batch: torch.Tensor, steps: int, overrides: dict, **settings
) -> list[float]:
    run = training.build(name, device, global_batch=len(batch), steps=steps, overrides=overrides, **settings)
    if settings.get("compile_backend") == "inductor":
        with torch._inductor.config.patch(fallback_random=True):  # in force at the first call, which compiles
            return training.losses(run, batch, steps)
    return training.losses(run, batch, steps)


def _attention_kernels(model: torch.nn.Module, device: torch.device, batch: torch.Tensor) -> dict:
    def forward() -> torch.Tensor:
        with autocast_for(device, None):
            return model(batch).loss

    return measure.sdpa_kernels(model, forward)


def check_model(
    name: str, device: torch.device, *, batch_size: int, steps: int, compile_backend: str | None, overrides: dict
) -> dict:
    """One model's figures and verdicts (see the module docstring for the tolerances)."""
    as_trained, overrides = overrides, without_dropout(name, overrides)
    reference = training.build(name, device, global_batch=batch_size, steps=steps, overrides=overrides,
                               precision="fp32")  # fmt: skip
    batch = training.random_log_mel(reference.model, batch_size, device)
    default_precision = "bf16" if device.type == "cuda" else "fp32"
    fp32 = training.losses(reference, batch, steps)
    bf16 = _curve(name, device, batch, steps, overrides, precision="bf16")
    fused = _curve(name, device, batch, steps, overrides, precision="fp32", fused_adamw=True)
    row = {
        "model": name,
        "overrides": {key: value for key, value in overrides.items() if "dropout" in key},
        "fp32_losses": fp32,
        "bf16_losses": bf16,
        "fused_losses": fused,
    }
    bf16_gaps = relative_gaps(bf16, fp32)
    row["bf16_step1_gap"], row["bf16_max_gap"] = bf16_gaps[0], max(bf16_gaps)
    row["fused_max_gap"] = max(relative_gaps(fused, fp32))
    curves = [fp32, bf16, fused]
    if compile_backend:
        compiled = _curve(name, device, batch, steps, overrides, precision=default_precision,
                          compile_backend=compile_backend)  # fmt: skip
        eager = bf16 if default_precision == "bf16" else fp32
        row["compiled_losses"], row["compile_backend"] = compiled, compile_backend
        row["compiled_max_gap"] = max(relative_gaps(compiled, eager))
        curves.append(compiled)
    row["all_finite"] = all(math.isfinite(value) for curve in curves for value in curve)
    # The kernels of the model as it trains, dropout included (it can decide the kernel).
    kernels_of = reference.model if overrides == as_trained else training.build(
        name, device, global_batch=batch_size, overrides=as_trained).model  # fmt: skip
    row["attention_kernels"] = _attention_kernels(kernels_of, device, batch)
    row["problems"] = problems(row, device.type)
    return row


def problems(row: dict, device_type: str) -> list[str]:
    """What fails the tolerances above, in words (empty: all good). The math kernel counts on a GPU only:
    PyTorch's CPU flash kernel has no dropout, so a CPU takes math for any attention with dropout
    (HuBERT's and wav2vec 2.0's 0.1) by design; CUDA's flash and memory-efficient kernels have it."""
    found = []
    if not row["all_finite"]:
        found.append("non-finite loss")
    if row["bf16_step1_gap"] > BF16_STEP1_TOLERANCE or row["bf16_max_gap"] > BF16_ANY_STEP_TOLERANCE:
        found.append(f"bf16 drifts from fp32 by {row['bf16_max_gap']:.1%}")
    if row["fused_max_gap"] > FUSED_TOLERANCE:
        found.append(f"fused AdamW drifts by {row['fused_max_gap']:.2%}")
    compiled_tolerance = BF16_STEP1_TOLERANCE if device_type == "cuda" else COMPILED_FP32_TOLERANCE
    if row.get("compiled_max_gap", 0.0) > compiled_tolerance:
        found.append(f"compiled drifts from eager by {row['compiled_max_gap']:.2%}")
    if device_type == "cuda" and "math" in row["attention_kernels"].get("encoder", {}):
        found.append("the encoder's attention runs SDPA's math kernel")
    return found
