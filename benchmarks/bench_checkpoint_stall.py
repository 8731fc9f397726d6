"""How long a checkpoint stops training: Ray Train's sync against async checkpoint upload, on CPU.

    python benchmarks/bench_checkpoint_stall.py [--model mae-en768-12] [--crop-frames 144]
        [--steps 10] [--checkpoint-at 4] [--shards DIR] [--bucket-mb-per-s R]

A real pretraining run (1 Ray Train worker, 1 CPU, batch 2) of a model over 100M parameters, with
one checkpoint in the middle (weights + AdamW state: 12 bytes per parameter, 1.3 GB for the
default's 111M), once per `--checkpoint-upload` mode. Step wall time is the gap between the
MLflow timestamps of consecutive steps' `loss` (every step is logged), so the step after the
checkpoint carries the whole checkpoint: the local write, and in sync mode the copy to storage.
Stall = that step's time minus the median step time (the first step, start-up, left out); time
lost = the stall plus every later step's time beyond the median (an async copy runs beside them).

Then the two parts of a checkpoint are timed apart, in this process, on the same model: the
local write (safetensors + torch.save + sha256, `pipeline.checkpoint`) and the copy to a storage
folder (`pyarrow.fs.copy_files`, as Ray Train does). Async upload can hide only the copy.

With `--bucket-mb-per-s R` the storage is a bucket instead: the cluster rehearsal's S3-compatible
store on loopback behind its fault proxy, throttled to R MB/s each way (slow storage), so the copy
is the larger part, as on a cluster, and the runs show what async upload hides of it.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import mlflow
import pyarrow.fs as pafs
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

DEFAULT_MODEL = "mae-en768-12"  # 111.3M parameters (models registry, study Table I)
SHARDS_PRESET = "dasheng"  # the mae models' front end (64 mel bins)


def build_shards() -> Path:
    """Real shards for the mae front end: the tiny default corpus through pipeline.prep (built once
    under $AUDIOSCALE_HOME; the stall measured here does not depend on which audio is read)."""
    from pipeline.defaults import ensure_default_data

    return ensure_default_data(preset_name=SHARDS_PRESET, with_tasks=False, tiny=True).shards_dir


def step_times(tracking_uri: str, run_id: str) -> dict[int, float]:
    """{step: wall seconds since the previous step's log} from the `loss` metric's timestamps."""
    client = mlflow.MlflowClient(tracking_uri)
    stamps = {m.step: m.timestamp / 1000 for m in client.get_metric_history(run_id, "loss")}
    steps = sorted(stamps)
    return {step: stamps[step] - stamps[previous] for previous, step in zip(steps, steps[1:], strict=False)}


def run_mode(mode: str, args: argparse.Namespace, shards: Path, work: Path, storage: str | None) -> dict[int, float]:
    from pipeline.pretrain.driver import PretrainConfig, run_pretraining

    result = run_pretraining(
        PretrainConfig.from_flat(
            model_name=args.model, model_overrides={"crop_frames": args.crop_frames}, shards_dir=str(shards),
            steps=args.steps, global_batch_size=2, num_workers=1, cpus_per_worker=1.0, log_every_steps=1,
            checkpoint_every_steps=args.steps, checkpoint_steps=(args.checkpoint_at,), rankme_every_steps=0,
            system_metrics_every_s=0,
            run_name=f"stall-{mode}", storage_path=storage or str(work / "ray"), tracking_uri=f"sqlite:///{work / 'mlflow.db'}",
            max_failures=0, checkpoint_upload=mode,
        )
    )  # fmt: skip
    return step_times(result.tracking_uri, result.run_id)


def stall(times: dict[int, float], checkpoint_step: int) -> tuple[float, float, float, float]:
    """(checkpoint step's time, median step time, its stall, time lost over all the steps after it).

    The median leaves out the start-up step and the checkpoint's; the time lost adds what every
    later step took beyond the median too (an async copy shares the CPU and disk with them)."""
    after = checkpoint_step + 1  # the gap that holds step `checkpoint_step`'s report
    median = statistics.median(t for step, t in times.items() if step not in (after, min(times)))
    lost = sum(t - median for step, t in times.items() if step >= after)
    return times[after], median, times[after] - median, lost


def time_checkpoint_parts(args: argparse.Namespace, work: Path) -> tuple[float, float, float]:
    """(local write s, copy to storage s, GB) of the same model with AdamW state, in this process."""
    import models
    from pipeline.checkpoint import (
        capture_rng_state,
        save_model_checkpoint,
        save_train_state,
    )
    from pipeline.pretrain.optim import build_optimizer, build_scheduler

    model = models.build_model(args.model, crop_frames=args.crop_frames)
    optimizer = build_optimizer(model, base_lr=1.5e-4, global_batch_size=2)
    scheduler = build_scheduler(optimizer, warmup_steps=1, total_steps=10)
    model(torch.randn(2, args.crop_frames, model.spec.n_mels)).loss.backward()
    optimizer.step()  # AdamW's moments exist from the first step on
    local, storage = work / "local", work / "storage" / "checkpoint"
    started = time.perf_counter()
    save_model_checkpoint(local, model, model_name=args.model, overrides={}, step=1, shard_fingerprint="")
    save_train_state(local, optimizer=optimizer, scheduler=scheduler, step=1, rng_state=capture_rng_state())
    written = time.perf_counter()
    storage.mkdir(parents=True)  # Ray Train's StorageContext creates the folder, then copies into it
    pafs.copy_files(str(local), str(storage), chunk_size=64 * 1024 * 1024)  # Ray Train's chunk size
    copied = time.perf_counter()
    size_gb = sum(f.stat().st_size for f in local.iterdir()) / 1e9
    return written - started, copied - written, size_gb


def slow_bucket(stack: contextlib.ExitStack, work: Path, bytes_per_s: float) -> str:
    """A bucket URI on the rehearsal's store behind a proxy that passes `bytes_per_s`; the store's
    credentials go into this process's environment, which the local Ray's workers inherit."""
    from cluster.rehearsal.fault_proxy import fault_proxy
    from cluster.rehearsal.object_store import running_object_store

    store = stack.enter_context(running_object_store(work))
    proxy = stack.enter_context(fault_proxy(store.port))
    proxy.throttle(bytes_per_s)
    os.environ.update(store.admin.env())
    return store.uri("ray", port=proxy.port)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter
    )
    parser.add_argument("--model", default=DEFAULT_MODEL)
    parser.add_argument("--crop-frames", type=int, default=144, help="short crops keep a CPU step near 1 s")
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--checkpoint-at", type=int, default=4, help="the checkpoint in the middle")
    parser.add_argument("--shards", default=None, help=f"{SHARDS_PRESET} shards (default: tiny ones built in /tmp)")
    parser.add_argument("--bucket-mb-per-s", type=float, default=None, help="storage: a bucket throttled to this")
    args = parser.parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    torch.set_num_threads(1)
    shards = Path(args.shards) if args.shards else build_shards()
    print(
        f"{args.model}, crop {args.crop_frames} frames, batch 2, 1 worker x 1 CPU, {args.steps} steps, "
        f"checkpoint after step {args.checkpoint_at}"
    )
    rows = {}
    with tempfile.TemporaryDirectory(prefix="bench-stall-") as work, contextlib.ExitStack() as stack:
        storage = None
        if args.bucket_mb_per_s:
            storage = slow_bucket(stack, Path(work), args.bucket_mb_per_s * 1e6)
            print(f"storage: {storage.partition('?')[0]}, throttled to {args.bucket_mb_per_s:g} MB/s")
        for mode in ("sync", "async"):
            times = run_mode(mode, args, shards, Path(work) / mode, storage)  # run names differ per mode
            rows[mode] = stall(times, args.checkpoint_at)
            print(f"  {mode:<5} step times (s): " + " ".join(f"{step}:{t:.2f}" for step, t in sorted(times.items())))
        write_s, copy_s, size_gb = time_checkpoint_parts(args, Path(work) / "parts")
    print(f"{'upload':<7} {'checkpoint step s':>18} {'median step s':>14} {'stall s':>8} {'lost s, later steps':>20}")
    for mode, (at_checkpoint, median, stalled, lost) in rows.items():
        print(f"{mode:<7} {at_checkpoint:18.2f} {median:14.2f} {stalled:8.2f} {lost:20.2f}")
    stall_ratio, lost_ratio = (rows["async"][i] / rows["sync"][i] for i in (2, 3))
    print(f"async / sync: stall {stall_ratio:.2f}, time lost {lost_ratio:.2f}")
    print(f"checkpoint {size_gb:.2f} GB: local write {write_s:.2f} s (stays in async), copy to storage {copy_s:.2f} s")


if __name__ == "__main__":
    main()
