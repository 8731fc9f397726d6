"""Can the readers feed the GPUs? CPU cores each H100 needs for the training crops of three models.

    python benchmarks/bench_reader_budget.py [--seconds 8] [--mfu 0.4] [--json out.json]

Per model (mae-en768-12: 10 s x 64 mel; audiomae++-base and -large: 2 s x 80 mel):
- FLOPs per training sample: the model's own `training_flops_per_sample()` (Kaplan's 6N per token,
  each part on the tokens it processes; models/mae/masked_autoencoder.py).
- Crops/s one H100 consumes = peak x MFU / FLOPs per sample, with the dense bf16 peak 989 TFLOP/s
  (NVIDIA H100 SXM datasheet: 1,979 with sparsity, halved) and MFU 0.4 unless `--mfu`.
- Crops per CPU-second of the training reader (`pipeline.shards.crop_stream`: read, crop, shuffle,
  batch; as float16 with the normalisation left to the GPU, as a GPU run reads them, and normalised to
  float32 on the CPU, as a CPU run does), steady state (the first epoch read is not timed),
  single-threaded, as 1 process and as 2 at once (two ranks of a 2-worker run, sharing the memory
  bus). Counted against the process's own CPU time, so other load on the machine does not enter.
- Cores per GPU = GPU crops/s / reader crops/s per core. Target: at most 4 (an 8-GPU node keeps headroom).

Shard sets, all from the default corpus (built by prep into $AUDIOSCALE_HOME if missing):
- "default": the preset's shards as prep writes them (format 2). Its segments are short (median
  ~3 s), so 10 s crops come only from the few >= 5 s segments, the rest decoded for nothing.
- "10 s rows": the same frames re-cut into 1000-frame rows (like AudioSet's 10 s clips), in format 2
  and in format 1 (the nested-list layout before this change) side by side: the format's effect.
The cost of Ray Train's worker itself (its share of a core) is not in these figures.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

H100_DENSE_BF16_FLOPS = 989e12  # NVIDIA H100 SXM datasheet: 1,979 TFLOP/s with sparsity, dense is half
TARGET_CORES_PER_GPU = 4.0  # #16 item 1
MODELS = (("mae-en768-12", "dasheng"), ("audiomae++-base", "audiomae"), ("audiomae++-large", "audiomae"))


def flops_and_crop(name: str) -> tuple[float, int]:
    import models

    model = models.build_model(name)
    return float(model.training_flops_per_sample()), int(model.spec.crop_frames)


def ten_second_rows(source: Path, target: Path, *, nested: bool) -> Path:
    """The frames of `source` re-cut into 1000-frame rows, as a valid shard set (format 2, or 1 if nested)."""
    from pipeline.shards.format import flat_mels, read_manifest, read_shard_table
    from pipeline.shards.integrity import describe_part_files
    from pipeline.shards.location import locate_shards

    manifest = read_manifest(source)
    n_mels = int(manifest["n_mels"])
    flat, _ = flat_mels(read_shard_table(source, columns=["mel"])["mel"], n_mels)
    rows = len(flat) // 1000
    frames = flat[: rows * 1000].reshape(rows, 1000, n_mels).astype(np.float32)
    target.mkdir(parents=True)
    per_file = 100  # prep's row-group size
    for part, begin in enumerate(range(0, rows, per_file)):
        block = frames[begin : begin + per_file]
        count = len(block)
        if nested:
            mel = pa.ListArray.from_arrays(
                pa.array(np.arange(count + 1, dtype=np.int32) * 1000),
                pa.FixedSizeListArray.from_arrays(pa.array(block.astype(np.float16).reshape(-1)), n_mels),
            )
        else:
            mel = pa.array([row.astype("<f2").tobytes() for row in block], pa.large_binary())
        sums = pa.FixedSizeListArray.from_arrays(pa.array(block.sum(axis=1, dtype=np.float64).reshape(-1)), n_mels)
        squares = pa.FixedSizeListArray.from_arrays(
            pa.array(np.square(block).sum(axis=1, dtype=np.float64).reshape(-1)), n_mels)  # fmt: skip
        table = pa.table({
            "clip_id": [f"ten-second-{begin + i:06d}" for i in range(count)], "num_frames": pa.array([1000] * count, pa.int32()),
            "mel": mel, "mel_bin_sum": sums, "mel_bin_sq_sum": squares,
        })  # fmt: skip
        pq.write_table(table, target / f"part-{part:05d}.parquet", compression="zstd", row_group_size=per_file)
    manifest = {**manifest, "num_rows": rows, "format_version": 1 if nested else 2}
    manifest["part_files"] = describe_part_files(locate_shards(target))
    (target / "manifest.json").write_text(json.dumps(manifest))
    return target


def reader_rate(
    shards: str,
    crop_frames: int,
    rank: int,
    world_size: int,
    seconds: float,
    normalise: bool,
    out,
    clock=time.process_time,
    window_rows: int = 256,
) -> None:
    """Crops per CPU-second (or per second of `clock`, e.g. time.monotonic for wall time) of one
    single-threaded rank after its first epoch (run in its own process)."""
    pa.set_cpu_count(1)
    pa.set_io_thread_count(1)
    from pipeline.shards.crop_stream import CropStream, StreamPlan, StreamPosition, batches

    plan = StreamPlan(shards, crop_frames=crop_frames, seed=0, rank=rank, world_size=world_size)
    stream = batches(CropStream(plan, window_rows=window_rows), batch_size=64, start=StreamPosition())
    taken = 0
    while taken < plan.rows_per_epoch:  # warm-up: one epoch (page cache, allocator)
        taken += len(next(stream)[0])
    count, started = 0, clock()
    while clock() - started < seconds:
        raw = next(stream)[0]
        count += len(raw.normalised() if normalise else raw)
    out.put(count / (clock() - started))


def per_core_rate(
    shards: str,
    crop_frames: int,
    *,
    cores: int,
    seconds: float,
    normalise: bool,
    clock=time.process_time,
    window_rows: int = 256,
) -> float:
    context = multiprocessing.get_context("spawn")
    out = context.Queue()
    workers = [context.Process(target=reader_rate,
                               args=(shards, crop_frames, rank, cores, seconds, normalise, out, clock, window_rows))
               for rank in range(cores)]  # fmt: skip
    for worker in workers:
        worker.start()
    rates = [out.get(timeout=600) for _ in workers]
    for worker in workers:
        worker.join()
    return sum(rates) / cores


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=8.0, help="timed seconds per measurement")
    parser.add_argument("--mfu", type=float, default=0.4)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    from pipeline.defaults import ensure_default_data

    with tempfile.TemporaryDirectory(prefix="bench-reader-") as work:
        shard_sets: dict[tuple[str, str], str] = {}
        for preset in ("dasheng", "audiomae"):
            default = ensure_default_data(preset_name=preset, with_tasks=False).shards_dir
            shard_sets[(preset, "default")] = str(default)
            for label, nested in (("10 s rows, format 2", False), ("10 s rows, format 1", True)):
                shard_sets[(preset, label)] = str(
                    ten_second_rows(default, Path(work) / f"{preset}-{nested}", nested=nested)
                )
        results = []
        print(
            f"H100 at {args.mfu:.0%} MFU of {H100_DENSE_BF16_FLOPS / 1e12:.0f} TFLOP/s; reader single-threaded, steady "
            "state, crops per CPU-second (float16 to the GPU / normalised float32 as on a CPU run)"
        )
        rates: dict[tuple, float] = {}
        for name, preset in MODELS:
            flops, crop_frames = flops_and_crop(name)
            gpu_rate = H100_DENSE_BF16_FLOPS * args.mfu / flops
            print(
                f"\n{name}: {flops / 1e9:.1f} GFLOP per sample, {crop_frames} frames; an H100 eats {gpu_rate:,.0f} crops/s"
            )
            for (shard_preset, label), shards in shard_sets.items():
                if shard_preset != preset:
                    continue
                for cores in (1, 2):
                    for normalise in (False, True):
                        key = (preset, crop_frames, label, cores, normalise)
                        if key not in rates:  # audiomae++ base and large read the same crops
                            rates[key] = per_core_rate(shards, crop_frames, cores=cores, seconds=args.seconds,
                                                       normalise=normalise)  # fmt: skip
                    per_core, normalised = rates[key[:-1] + (False,)], rates[key]
                    need = gpu_rate / per_core
                    verdict = "meets" if need <= TARGET_CORES_PER_GPU else "misses"
                    print(
                        f"   {label:<20} {cores} process(es): {per_core:7,.0f} / {normalised:7,.0f} crops per CPU-s -> "
                        f"{need:5.1f} cores per GPU ({verdict} <= {TARGET_CORES_PER_GPU:g})"
                    )
                    results.append({"model": name, "gflop_per_sample": flops / 1e9, "gpu_crops_per_s": gpu_rate,
                                    "shards": label, "processes": cores, "crops_per_cpu_s": per_core,
                                    "crops_per_cpu_s_normalised": normalised, "cores_per_gpu": need})  # fmt: skip
        if args.json:
            args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
