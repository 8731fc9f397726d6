"""Training-step benchmarks of the model zoo.

CPU (default): CrossMAE (gamma = 0.25) against the MAE decoder on the same encoder, same batch.
Each variant runs in a fresh subprocess so neither inherits the other's allocator state.
  step time: median wall time of full training steps (forward, backward, AdamW step) after warm-up.
  peak memory: tensor bytes, exactly: parameters + AdamW state (counted from the tensors) + the
    peak of bytes allocated during one training step, read from torch.profiler's memory events
    ("Total Allocated" counts every allocation and free through torch's CPU allocator from the
    start of profiling). The process's peak RSS is printed too as a cross-check; it includes the
    Python/torch baseline (~0.3-0.5 GB) that both variants share.

GPU (`--gpu`): bf16 autocast step time, samples/s and model FLOPs utilisation (Kaplan 6N per
processed token, `model.training_flops_per_sample()`, over the device's dense bf16 peak) for
audiomae++-base and mae-en768-12 at batch 256, then the CrossMAE comparison with
torch.cuda.max_memory_allocated as the peak.

  python benchmarks/bench_models.py                       # CPU, audiomae++-tiny, batch 16
  python benchmarks/bench_models.py --model audiomae++-base --batch 8 --steps 5
  python benchmarks/bench_models.py --gpu --batch 256
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

import models  # noqa: E402
from models.interface import count_parameters  # noqa: E402

CROSS_OVERRIDES = {"decoder": "cross", "prediction_ratio": 0.25}
# Dense bf16 peak of the GPUs this project is lent (vendor datasheets, without sparsity).
PEAK_BF16_TFLOPS = {"H100": 989.0, "H200": 989.0, "A100": 312.0, "L4": 121.0}


def _synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def build_training_step(model: torch.nn.Module, mel: torch.Tensor, *, bf16: bool):
    """A closure running one full training step on `mel`."""
    fused = mel.device.type == "cuda"
    optimizer = torch.optim.AdamW(model.parameters(), lr=1.5e-4 * model.lr_scale, betas=(0.9, 0.95), fused=fused)

    def step() -> float:
        with torch.autocast(mel.device.type, dtype=torch.bfloat16, enabled=bf16):
            loss = model(mel).loss
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        return loss.item()  # forces completion on GPU too

    return step, optimizer


def _state_bytes(model: torch.nn.Module, optimizer: torch.optim.Optimizer) -> int:
    params = sum(p.numel() * p.element_size() for p in model.parameters())
    state = sum(
        value.numel() * value.element_size()
        for per_param in optimizer.state.values()
        for value in per_param.values()
        if torch.is_tensor(value)
    )
    return params + state


def _profiled_step_peak_bytes(step) -> int:
    """Peak of tensor bytes allocated during one step (net of frees), from profiler memory events."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        step()
    with tempfile.TemporaryDirectory() as tmp:
        trace_path = Path(tmp) / "trace.json"
        prof.export_chrome_trace(str(trace_path))
        events = json.loads(trace_path.read_text())["traceEvents"]
    totals = [
        e["args"]["Total Allocated"]
        for e in events
        if e.get("name") == "[memory]" and e["args"].get("Device Type") == 0
    ]
    return max(totals) if totals else 0


def measure_cpu_variant(name: str, overrides: dict, batch: int, steps: int, threads: int) -> dict:
    """Runs inside the per-variant subprocess."""
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    model = models.build_model(name, **overrides)
    mel = torch.randn(batch, model.spec.crop_frames, model.spec.n_mels)
    step, optimizer = build_training_step(model, mel, bf16=False)
    for _ in range(2):  # warm-up: allocator caches, AdamW state
        step()
    times = []
    for _ in range(steps):
        start = time.perf_counter()
        step()
        times.append(time.perf_counter() - start)
    state_bytes = _state_bytes(model, optimizer)
    step_peak = _profiled_step_peak_bytes(step)
    return {
        "variant": "cross" if overrides else "mae",
        "median_step_s": statistics.median(times),
        "state_bytes": state_bytes,
        "step_peak_bytes": step_peak,
        "peak_bytes": state_bytes + step_peak,
        "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
        "flops_per_sample": model.training_flops_per_sample(),
    }


def _run_variant_subprocess(args: argparse.Namespace, overrides: dict) -> dict:
    command = [
        sys.executable, __file__, "--_variant", json.dumps(overrides), "--model", args.model,
        "--batch", str(args.batch), "--steps", str(args.steps), "--threads", str(args.threads),
    ]  # fmt: skip
    result = subprocess.run(command, check=True, capture_output=True, text=True)
    return json.loads(result.stdout.strip().splitlines()[-1])


def compare_decoders_cpu(args: argparse.Namespace) -> None:
    print(
        f"model {args.model}, batch {args.batch}, {args.steps} timed steps, "
        f"{args.threads} torch thread(s), one fresh subprocess per variant"
    )
    mae = _run_variant_subprocess(args, {})
    cross = _run_variant_subprocess(args, CROSS_OVERRIDES)
    for row in (mae, cross):
        print(
            f"  {row['variant']:<5} median step {row['median_step_s'] * 1e3:8.1f} ms   "
            f"peak tensor memory {row['peak_bytes'] / 2**20:8.1f} MiB "
            f"(state {row['state_bytes'] / 2**20:.1f} + step {row['step_peak_bytes'] / 2**20:.1f})   "
            f"peak RSS {row['peak_rss_bytes'] / 2**20:8.1f} MiB   "
            f"{row['flops_per_sample'] / 1e9:.2f} GFLOP/sample"
        )
    time_ratio = mae["median_step_s"] / cross["median_step_s"]
    memory_ratio = cross["peak_bytes"] / mae["peak_bytes"]
    print(f"step time ratio MAE / CrossMAE(0.25): {time_ratio:.2f}  (target >= 1.4)")
    print(f"peak memory ratio CrossMAE(0.25) / MAE: {memory_ratio:.2f}  (target <= 0.6)")
    print(f"step-only memory ratio: {cross['step_peak_bytes'] / mae['step_peak_bytes']:.2f}")


def _peak_tflops(device: torch.device, override: float | None) -> float:
    if override is not None:
        return override
    device_name = torch.cuda.get_device_name(device)
    for key, tflops in PEAK_BF16_TFLOPS.items():
        if key in device_name:
            return tflops
    raise SystemExit(f"unknown GPU {device_name!r}: pass --peak-tflops for the MFU")


def measure_throughput(
    name: str, overrides: dict, batch: int, steps: int, device: torch.device, peak_tflops: float
) -> dict:
    """bf16 training steps on `device` (a GPU in --gpu mode; any device works for a smoke check)."""
    torch.manual_seed(0)
    model = models.build_model(name, **overrides).to(device)
    mel = torch.randn(batch, model.spec.crop_frames, model.spec.n_mels, device=device)
    step, _ = build_training_step(model, mel, bf16=True)
    for _ in range(3):
        step()
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    times = []
    for _ in range(steps):
        _synchronize(device)
        start = time.perf_counter()
        step()
        _synchronize(device)
        times.append(time.perf_counter() - start)
    step_s = statistics.median(times)
    samples_per_s = batch / step_s
    achieved_flops = model.training_flops_per_sample() * samples_per_s
    return {
        "name": name + (" +cross(0.25)" if overrides else ""),
        "params_m": count_parameters(model) / 1e6,
        "step_s": step_s,
        "samples_per_s": samples_per_s,
        "mfu": achieved_flops / (peak_tflops * 1e12),
        "peak_bytes": torch.cuda.max_memory_allocated(device) if device.type == "cuda" else 0,
    }


def benchmark_gpu(args: argparse.Namespace) -> None:
    if not torch.cuda.is_available():
        raise SystemExit("--gpu needs a CUDA device; run without --gpu for the CPU comparison")
    torch.backends.cuda.matmul.allow_tf32 = True
    device = torch.device("cuda")
    peak = _peak_tflops(device, args.peak_tflops)
    print(f"{torch.cuda.get_device_name()} (bf16 peak {peak:.0f} TFLOP/s), batch {args.batch}, bf16 autocast")
    rows = []
    for name in ("audiomae++-base", "mae-en768-12"):
        for overrides in ({}, CROSS_OVERRIDES):
            rows.append(measure_throughput(name, overrides, args.batch, args.steps, device, peak))
            torch.cuda.empty_cache()
    for row in rows:
        print(
            f"  {row['name']:<30} {row['params_m']:7.2f}M  step {row['step_s'] * 1e3:8.1f} ms  "
            f"{row['samples_per_s']:9.0f} samples/s  MFU {100 * row['mfu']:5.1f}%  "
            f"peak {row['peak_bytes'] / 2**30:6.2f} GiB"
        )
    for mae, cross in zip(rows[::2], rows[1::2]):
        print(
            f"  {mae['name']}: step time ratio {mae['step_s'] / cross['step_s']:.2f}, "
            f"peak memory ratio {cross['peak_bytes'] / mae['peak_bytes']:.2f}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="audiomae++-tiny", help="encoder for the CPU comparison")
    parser.add_argument("--batch", type=int, default=None, help="default 16 on CPU, 256 with --gpu")
    parser.add_argument("--steps", type=int, default=None, help="timed steps (default 5 CPU, 20 GPU)")
    parser.add_argument("--threads", type=int, default=2, help="torch threads on CPU")
    parser.add_argument("--gpu", action="store_true", help="bf16 throughput and MFU on a CUDA device")
    parser.add_argument("--peak-tflops", type=float, default=None, help="device bf16 peak for the MFU")
    parser.add_argument("--_variant", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.batch is None:
        args.batch = 256 if args.gpu else 16
    if args.steps is None:
        args.steps = 20 if args.gpu else 5
    if args._variant is not None:
        overrides = json.loads(args._variant)
        print(json.dumps(measure_cpu_variant(args.model, overrides, args.batch, args.steps, args.threads)))
    elif args.gpu:
        benchmark_gpu(args)
    else:
        compare_decoders_cpu(args)


if __name__ == "__main__":
    main()
