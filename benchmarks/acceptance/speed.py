"""Is training fast on this device? Step time, samples/s, MFU and peak memory of the worker's step.

MFU = FLOPs per sample x samples/s over a peak. FLOPs per sample are counted by torch's
FlopCounterMode on one micro-batch's forward and backward (matrix products, convolutions and attention,
as executed: only the unmasked tokens through the encoder), so they need no formula per family; the
6 N per token estimate the models state (`training_flops_per_sample`) is printed beside it. Two
peaks: the datasheet's dense bf16 rate, and the bf16 matrix-product rate measured in the same run
(the ceiling this card actually reaches). The step is what the worker runs: micro-batches with
gradient accumulation, bf16 autocast, fused AdamW on a GPU, the loss read back each step.
"""

from __future__ import annotations

import gc
import time

import torch

from benchmarks.acceptance import measure, training
from pipeline.pretrain.step import autocast_for


def flops_per_sample(run: training.Training, micro: torch.Tensor) -> float:
    def forward_backward() -> None:
        with autocast_for(run.device, None):
            loss = run.model(micro).loss
        loss.backward()

    flops = measure.counted_flops(forward_backward)
    run.model.zero_grad(set_to_none=True)
    return flops / len(micro)


def _measure_once(name: str, device: torch.device, *, global_batch: int, micro_batch: int, compile_backend,
                  warmup: int, timed: int, overrides: dict) -> dict:  # fmt: skip
    measure.reset_peak_memory(device)
    run = training.build(name, device, global_batch=global_batch, micro_batch=micro_batch, steps=warmup + timed,
                         fused_adamw=device.type == "cuda", compile_backend=compile_backend, peak_lr=None,
                         overrides=overrides)  # fmt: skip
    micro = training.random_log_mel(run.model, micro_batch, device)
    per_sample = flops_per_sample(run, micro)
    batches, counter = training.repeated(micro), iter(range(1, 10**9))
    began = time.perf_counter()
    training.step(run, batches, next(counter))  # the first step compiles
    first_step_s = time.perf_counter() - began
    seconds = measure.median_step_seconds(lambda: training.step(run, batches, next(counter)), device,
                                          warmup=max(0, warmup - 1), timed=timed)  # fmt: skip
    step_s = measure.median(seconds)
    stated = run.model.training_flops_per_sample() if hasattr(run.model, "training_flops_per_sample") else None
    return {
        "model": name, "compiled": bool(compile_backend), "global_batch": global_batch, "micro_batch": micro_batch,
        "accumulation": run.config.accumulation_steps, "first_step_s": first_step_s, "step_s": step_s,
        "step_s_range": [min(seconds), max(seconds)], "samples_per_s": global_batch / step_s,
        "counted_flops_per_sample": per_sample, "stated_6n_flops_per_sample": stated,
        "peak_memory_gib": measure.peak_memory_gib(device),
    }  # fmt: skip


def _out_of_memory(error: BaseException) -> bool:
    """torch's OOM, or the plain RuntimeErrors a nearly full device raises from cuBLAS or a lazy kernel load."""
    text = str(error)
    return isinstance(error, torch.OutOfMemoryError) or (
        isinstance(error, RuntimeError) and ("out of memory" in text or "CUBLAS_STATUS_ALLOC_FAILED" in text)
    )


def measure_model(name: str, device: torch.device, *, global_batch: int, compile_backend: str | None, warmup: int,
                  timed: int, peaks: dict, start_micro_batch: int | None = None,
                  overrides: dict | None = None) -> dict:  # fmt: skip
    """The model's step figures at `global_batch`, the micro-batch (from `start_micro_batch`, or the whole
    batch) halved until it fits in memory."""
    micro = start_micro_batch or global_batch
    while True:
        try:
            row = _measure_once(name, device, global_batch=global_batch, micro_batch=micro,
                                compile_backend=compile_backend, warmup=warmup, timed=timed,
                                overrides=overrides or {})  # fmt: skip
            break
        except (torch.OutOfMemoryError, RuntimeError) as error:
            if not _out_of_memory(error) or micro == 1:
                raise
        # Out of the except block, the failed attempt's tensors are unreachable: free them before the retry.
        micro //= 2
        torch._dynamo.reset()
        gc.collect()
        measure.reset_peak_memory(device)
    achieved = row["counted_flops_per_sample"] * row["samples_per_s"] / 1e12
    row["achieved_tflops"] = achieved
    for peak_name, peak in peaks.items():
        row[f"mfu_vs_{peak_name}"] = achieved / peak if peak else None
    return row


def profile_steps(name: str, device: torch.device, *, micro_batch: int, global_batch: int,
                  compile_backend: str | None, steps: int, out_file, overrides: dict | None = None) -> None:  # fmt: skip
    """The kernels of `steps` training steps after warm-up, by device time (torch.profiler), into `out_file`:
    where a short MFU goes (attention, matmuls, elementwise, the optimizer, idle gaps between launches)."""
    run = training.build(name, device, global_batch=global_batch, micro_batch=micro_batch, steps=10**6,
                         fused_adamw=device.type == "cuda", compile_backend=compile_backend, peak_lr=None,
                         overrides=overrides or {})  # fmt: skip
    batches = training.repeated(training.random_log_mel(run.model, micro_batch, device))
    for number in range(1, 4):  # warm-up (and compile)
        training.step(run, batches, number)
    activities = [torch.profiler.ProfilerActivity.CPU]
    if device.type == "cuda":
        activities.append(torch.profiler.ProfilerActivity.CUDA)
    with torch.profiler.profile(activities=activities) as profile:
        for number in range(4, 4 + steps):
            training.step(run, batches, number)
    sort_by = "self_device_time_total" if device.type == "cuda" else "self_cpu_time_total"
    table = profile.key_averages().table(sort_by=sort_by, row_limit=30, max_name_column_width=70)
    out_file.write_text(f"{name}, compiled: {bool(compile_backend)}, {steps} steps of batch {global_batch} "
                        f"(micro {micro_batch})\n{table}\n")  # fmt: skip
