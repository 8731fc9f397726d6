"""Measuring tools shared by the acceptance checks: the device, step timing, FLOPs, the matmul rate,
and which attention kernel SDPA dispatches to, per top-level part of a model."""

from __future__ import annotations

import statistics
import time
from collections import Counter, defaultdict
from collections.abc import Callable

import torch
from torch import nn
from torch.nn import functional as F
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.flop_counter import FlopCounterMode

# Dense bf16 tensor-core peaks without sparsity (NVIDIA datasheets list them with sparsity, twice these):
# H100 SXM 989 (the reference for MFU), H100 PCIe 756, H100 NVL 835; H200 SXM 989, H200 NVL 835.
# First match wins: the variant markers before the bare names ("NVIDIA H100 80GB HBM3" is the SXM part).
PEAK_BF16_TFLOPS = (("H100 PCIe", 756.0), ("H100 NVL", 835.0), ("H200 NVL", 835.0), ("H100", 989.0), ("H200", 989.0))


def pick_device(choice: str) -> torch.device:
    """`auto`: the GPU when there is one, else the CPU; `cuda` without a GPU is an error that says so."""
    if choice == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if choice == "cuda" and not torch.cuda.is_available():
        raise SystemExit("--device cuda: torch sees no GPU here (torch.cuda.is_available() is False); use --device cpu")
    return torch.device(choice)


def device_name(device: torch.device) -> str:
    return torch.cuda.get_device_name(device) if device.type == "cuda" else "CPU"


def datasheet_peak_tflops(device: torch.device) -> float | None:
    """The card's dense bf16 peak, or None for a CPU or a card not in the table (MFU then left out)."""
    if device.type != "cuda":
        return None
    name = torch.cuda.get_device_name(device)
    return next((peak for key, peak in PEAK_BF16_TFLOPS if key in name), None)


def compile_error(device: torch.device, backend: str) -> str | None:
    """None when `torch.compile(backend=...)` works here, else its error. Inductor on a GPU builds Triton's
    launchers with the host's C compiler and Python headers: a machine without them fails here in seconds
    instead of in every compiled part."""
    try:
        torch.compile(lambda x: torch.sin(x) + 1, backend=backend)(torch.ones(8, device=device))
    except Exception as error:  # noqa: BLE001 - the message is the finding
        return f"{type(error).__name__}: {error}"[:400]
    finally:
        torch._dynamo.reset()
    return None


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def median_step_seconds(step: Callable[[], object], device: torch.device, *, warmup: int, timed: int) -> list[float]:
    """Seconds of each of `timed` calls of `step` after `warmup` untimed ones (CUDA events on a GPU)."""
    for _ in range(warmup):
        step()
    synchronize(device)
    seconds = []
    for _ in range(timed):
        if device.type == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            step()
            end.record()
            end.synchronize()
            seconds.append(start.elapsed_time(end) / 1000.0)
        else:
            began = time.perf_counter()
            step()
            seconds.append(time.perf_counter() - began)
    return seconds


def median(values: list[float]) -> float:
    return float(statistics.median(values))


def matmul_tflops(device: torch.device, *, size: int) -> float:
    """Measured rate of a square matrix product (bf16 on a GPU, fp32 on a CPU): the attainable ceiling."""
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    a = torch.randn(size, size, device=device, dtype=dtype)
    b = torch.randn(size, size, device=device, dtype=dtype)
    # 100 products (~0.2 s on an H100): long enough for the sustained clock, not just the boost.
    seconds = median_step_seconds(lambda: a @ b, device, warmup=5, timed=100 if device.type == "cuda" else 5)
    return 2 * size**3 / median(seconds) / 1e12


def counted_flops(step: Callable[[], object]) -> int:
    """FLOPs torch's counter sees in one call of `step` (matrix products and attention, forward and backward)."""
    counter = FlopCounterMode(display=False)
    with counter:
        step()
    return int(counter.get_total_flops())


class _SdpaKernels(TorchDispatchMode):
    """Records the fused SDPA kernel ops dispatched, under the top-level module running at the time."""

    def __init__(self) -> None:
        super().__init__()
        self.part = "model"
        self.calls: dict[str, Counter] = defaultdict(Counter)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = func.__name__.split(".")[0]
        if name.startswith("_scaled_dot_product") and not name.endswith("_backward"):
            self.calls[self.part][kernel_family(name)] += 1
        return func(*args, **(kwargs or {}))


class _SdpaCalls(TorchFunctionMode):
    """Counts calls of F.scaled_dot_product_attention, per top-level part (the kernels' `part`)."""

    def __init__(self, kernels: _SdpaKernels) -> None:
        super().__init__()
        self.kernels = kernels
        self.calls: Counter = Counter()

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if func is F.scaled_dot_product_attention:
            self.calls[self.kernels.part] += 1
        return func(*args, **(kwargs or {}))


def kernel_family(op_name: str) -> str:
    """flash / efficient / cudnn / math / flash-cpu from an aten SDPA op name."""
    for marker, family in (("flash_attention_for_cpu", "flash-cpu"), ("flash", "flash"), ("efficient", "efficient"),
                           ("cudnn", "cudnn"), ("math", "math")):  # fmt: skip
        if marker in op_name:
            return family
    return op_name


def sdpa_kernels(model: nn.Module, run_forward: Callable[[], torch.Tensor]) -> dict[str, dict[str, int]]:
    """{top-level part (encoder, decoder, ...): {kernel family: calls}} for one forward and backward.

    The math fallback is composed of plain ops (matmul, softmax) before any dispatch a Python mode sees,
    so it has no op of its own to record: an SDPA call that reached no fused kernel is counted as math.
    """
    kernels = _SdpaKernels()
    calls = _SdpaCalls(kernels)
    handles = []
    for part_name, part in model.named_children():

        def enter(_module, _inputs, name=part_name):
            kernels.part = name

        handles.append(part.register_forward_pre_hook(enter))
    try:
        with calls, kernels:
            run_forward().backward()
    finally:
        for handle in handles:
            handle.remove()
        model.zero_grad(set_to_none=True)
    found = {part: dict(counts) for part, counts in kernels.calls.items()}
    for part, count in calls.calls.items():
        unfused = count - sum(kernels.calls[part].values())
        if unfused > 0:
            found.setdefault(part, {})["math"] = found.get(part, {}).get("math", 0) + unfused
    return found


def peak_memory_gib(device: torch.device) -> float | None:
    if device.type != "cuda":
        return None
    return torch.cuda.max_memory_allocated(device) / 2**30


def reset_peak_memory(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(device)
