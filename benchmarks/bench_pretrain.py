"""Pretraining throughput: debug models on CPU, Ray Train against a plain loop, and GPU MFU.

    python benchmarks/bench_pretrain.py [--shards DIR] [--steps 60] [--threads 1]
    python benchmarks/bench_pretrain.py --gpu [--shards DIR] [--compile] [--peak-tflops 989]

CPU (default):
1. samples/s of every debug model in a plain single-process loop on in-memory crops.
2. Ray Train steady state against that plain loop, on the same model, the same shards and the
   same number of threads: the plain loop trains on crops loaded into memory first (no data
   cost at all); Ray Train's worker reads random crops from the shards (`pipeline.shards.crop_stream`).
   Steady state = the samples/s metric of every log window after the first (start-up excluded).
   Target ratio >= 0.8.
GPU (--gpu): bf16 samples/s and model FLOPs utilisation of audiomae++-base and mae-en768-12
(MFU = samples/s x model.training_flops_per_sample() / peak bf16 FLOP/s), and the crop
stream's crops/s from the shards, to show data loading keeps up.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import tempfile
import time
from pathlib import Path

import torch

import models
from pipeline.pretrain.optim import build_optimizer, build_scheduler
from pipeline.storage.paths import shards_dir_for

DEBUG_MODELS = ("mae-debug", "audiomae++-debug", "axlstm-debug")
GPU_MODELS = ("audiomae++-base", "mae-en768-12")
# Dense bf16 tensor-core peaks (no sparsity), by device-name fragment.
PEAK_BF16_TFLOPS = {"H200": 989.0, "H100": 989.0, "A100": 312.0, "L40S": 362.0, "A10G": 70.0}


def plain_loop_samples_per_s(
    model_name: str,
    crops: torch.Tensor,
    *,
    batch_size: int,
    steps: int,
    warmup_steps: int,
    device: str,
    compile_model: bool = False,
    overrides: dict | None = None,
) -> float:
    """Samples/s of a bare PyTorch loop (AdamW, clipping, bf16 autocast on GPU) over in-memory crops."""
    torch.manual_seed(0)
    model = models.build_model(model_name, **(overrides or {})).to(device)
    optimizer = build_optimizer(model, base_lr=1.5e-4, global_batch_size=batch_size, fused=device == "cuda")
    scheduler = build_scheduler(optimizer, warmup_steps=1, total_steps=warmup_steps + steps)
    step_model = torch.compile(model) if compile_model else model
    autocast = torch.autocast("cuda", dtype=torch.bfloat16) if device == "cuda" else contextlib.nullcontext()
    crops = crops.to(device)  # (n, crop_frames, n_mels)
    started = 0.0
    for step in range(warmup_steps + steps):
        if step == warmup_steps:
            if device == "cuda":
                torch.cuda.synchronize()
            started = time.perf_counter()
        index = torch.randint(0, len(crops), (batch_size,), device=crops.device)
        with autocast:
            loss = step_model(crops[index]).loss
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        scheduler.step()
    if device == "cuda":
        torch.cuda.synchronize()
    return steps * batch_size / (time.perf_counter() - started)


def synthetic_crops(model_name: str, count: int, overrides: dict | None = None) -> torch.Tensor:
    spec = models.build_model(model_name, **(overrides or {})).spec
    return torch.randn(count, spec.crop_frames, spec.n_mels)


def load_crops(shards_dir: str, crop_frames: int, count: int) -> torch.Tensor:
    from pipeline.shards.crops import read_crops

    return torch.from_numpy(read_crops(shards_dir, crop_frames=crop_frames, seed=0, limit=count))


def ray_train_steady_samples_per_s(
    model_name: str, shards_dir: str, *, batch_size: int, steps: int, threads: int
) -> float:
    from pipeline.pretrain.driver import PretrainConfig, run_pretraining
    from pipeline.tracking import runs as tracking

    with tempfile.TemporaryDirectory(prefix="bench-pretrain-") as work:
        result = run_pretraining(
            PretrainConfig.from_flat(
                model_name=model_name,
                shards_dir=shards_dir,
                steps=steps,
                global_batch_size=batch_size,
                num_workers=1,
                cpus_per_worker=float(threads),
                log_every_steps=10,
                checkpoint_every_steps=steps,
                rankme_every_steps=0,
                run_name="bench",
                storage_path=f"{work}/ray",
                tracking_uri=f"{work}/mlflow.db",
                max_failures=0,
            )
        )
        windows = tracking.read_run(result.tracking_uri, result.run_id)["metrics"]["samples_per_s"]
    # Steady state: without the first window (start-up) and the last (it holds the checkpoint).
    steady = [value for _, value in windows[1:-1]] or [windows[-1][1]]
    return statistics.median(steady)


def run_cpu(args: argparse.Namespace) -> None:
    torch.set_num_threads(args.threads)
    available = set(models.list_models())
    print(f"CPU, {args.threads} thread(s), batch {args.batch_size}, {args.steps} timed steps")
    print("1. plain loop, in-memory synthetic crops")
    for name in (n for n in DEBUG_MODELS if n in available):
        rate = plain_loop_samples_per_s(
            name, synthetic_crops(name, 256), batch_size=args.batch_size, steps=args.steps, warmup_steps=5, device="cpu"
        )
        print(f"   {name:<20} {rate:8.1f} samples/s")
    shards = Path(args.shards)
    if not (shards / "manifest.json").is_file():
        print(f"2. skipped: no shards at {shards} (run `python -m pipeline.pretrain` once, or pass --shards)")
        return
    import ray

    from pipeline.shards.format import read_manifest

    preset = read_manifest(shards)["preset"]["name"]
    ray.init(
        address="local",
        num_cpus=args.threads + 1,
        object_store_memory=512 * 1024**2,
        include_dashboard=False,
        log_to_driver=False,
    )
    try:
        print(f"2. Ray Train (1 worker, streaming from {shards}) vs plain loop (same crops in memory)")
        for name in (n for n in DEBUG_MODELS if n in available):
            spec = models.build_model(name).spec
            if spec.frontend_preset != preset:
                continue
            crops = load_crops(str(shards), spec.crop_frames, 512)
            plain = plain_loop_samples_per_s(
                name, crops, batch_size=args.batch_size, steps=args.steps, warmup_steps=5, device="cpu"
            )
            on_ray = ray_train_steady_samples_per_s(
                name, str(shards), batch_size=args.batch_size, steps=args.steps + 10, threads=args.threads
            )
            print(f"   {name:<20} plain {plain:8.1f}  ray train {on_ray:8.1f} samples/s  ratio {on_ray / plain:.2f}")
    finally:
        ray.shutdown()


def run_gpu(args: argparse.Namespace) -> None:
    if not torch.cuda.is_available():
        raise SystemExit("--gpu needs a CUDA device")
    torch.backends.cuda.matmul.allow_tf32 = True
    device_name = torch.cuda.get_device_name()
    peak_tflops = args.peak_tflops or next(
        (value for key, value in PEAK_BF16_TFLOPS.items() if key in device_name), None
    )
    if peak_tflops is None:
        raise SystemExit(f"unknown peak bf16 TFLOP/s for {device_name!r}; pass --peak-tflops")
    print(f"{device_name}, bf16 autocast, peak {peak_tflops:.0f} TFLOP/s, batch {args.batch_size}")
    for name in GPU_MODELS:
        model = models.build_model(name)
        flops_per_sample = model.training_flops_per_sample()
        del model
        rate = plain_loop_samples_per_s(
            name,
            synthetic_crops(name, 1024),
            batch_size=args.batch_size,
            steps=args.steps,
            warmup_steps=10,
            device="cuda",
            compile_model=args.compile,
        )
        mfu = rate * flops_per_sample / (peak_tflops * 1e12)
        print(f"   {name:<18} {rate:8.1f} samples/s  {flops_per_sample / 1e9:7.1f} GFLOP/sample  MFU {100 * mfu:5.1f}%")
        torch.cuda.empty_cache()
    shards = Path(args.shards)
    if (shards / "manifest.json").is_file():
        from pipeline.pretrain.data import MicroBatches
        from pipeline.shards.crop_stream import StreamPlan, StreamPosition
        from pipeline.shards.format import read_manifest

        frames = 200 if read_manifest(shards)["preset"]["name"] == "audiomae" else 1000
        plan = StreamPlan(str(shards), crop_frames=frames, seed=0, rank=0, world_size=1)
        stream = MicroBatches(plan, micro_batch_size=args.batch_size, window_rows=256, device=torch.device("cuda"),
                              start=StreamPosition())  # fmt: skip
        count, started = 0, time.perf_counter()
        while count < 4 * plan.rows_per_epoch:
            count += len(next(stream))
        torch.cuda.synchronize()
        stream.close()
        print(f"   crop stream from {shards}: {count / (time.perf_counter() - started):8.1f} crops/s to the GPU")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter
    )
    parser.add_argument(
        "--shards",
        default=str(shards_dir_for(preset_name="audiomae", max_hours=None)),
        help="shards for the Ray Train comparison (default: the default corpus's audiomae shards)",
    )
    parser.add_argument("--steps", type=int, default=60, help="timed steps per measurement")
    parser.add_argument("--batch-size", type=int, default=None, help="default: 32 on CPU, 256 on GPU")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (CPU); the Ray worker gets as many CPUs")
    parser.add_argument("--gpu", action="store_true", help="GPU mode: bf16 samples/s and MFU of the base models")
    parser.add_argument("--compile", action="store_true", help="torch.compile in GPU mode")
    parser.add_argument("--peak-tflops", type=float, default=None, help="override the device's peak bf16 TFLOP/s")
    args = parser.parse_args()
    args.batch_size = args.batch_size or (256 if args.gpu else 32)
    run_gpu(args) if args.gpu else run_cpu(args)


if __name__ == "__main__":
    main()
