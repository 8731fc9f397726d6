"""Does the training reader keep the device busy? The worker's own reader (`MicroBatches`: a thread that
reads, crops and shuffles Parquet shards ahead of the step; on a GPU the crops are normalised there)
feeding the worker's step, against the same step fed from one batch already on the device.

The step waits for the device at its end (the loss read back, as the worker loop's cross-rank
check does), so any time the training thread then spends waiting for the next micro-batch is time
the device has nothing to do: busy fraction = 1 - (time waiting for crops) / (wall time).
The worker runs one reader thread. "k readers" runs k of them, each reading the share of the data
rank i of k would read, taken in turn: what more reader threads per worker would buy, if one is short.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator

import torch

from benchmarks.acceptance import measure, training
from pipeline.pretrain.data import MicroBatches
from pipeline.shards.crop_stream import StreamPlan, StreamPosition


class _Waited:
    """An iterator that adds up the seconds its consumer spends waiting in `next`."""

    def __init__(self, source: Iterator[torch.Tensor]) -> None:
        self.source, self.wait_s = source, 0.0

    def __iter__(self) -> _Waited:
        return self

    def __next__(self) -> torch.Tensor:
        began = time.perf_counter()
        item = next(self.source)
        self.wait_s += time.perf_counter() - began
        return item


def _readers(shards: str, run: training.Training, count: int) -> list[MicroBatches]:
    crop_frames = run.model.spec.crop_frames
    return [
        MicroBatches(
            StreamPlan(shards, crop_frames=crop_frames, seed=0, rank=rank, world_size=count),
            micro_batch_size=run.config.effective_micro_batch_size,
            window_rows=run.config.data.shuffle_buffer_crops,
            device=run.device,
            start=StreamPosition(),
        )  # fmt: skip
        for rank in range(count)
    ]


def _in_turn(readers: list[MicroBatches]) -> Iterator[torch.Tensor]:
    for reader in itertools.cycle(readers):
        yield next(reader)


def _fed(run: training.Training, source: Iterator[torch.Tensor], *, warmup: int, timed: int) -> dict:
    waited = _Waited(source)
    numbers = itertools.count(1)
    for _ in range(warmup):
        training.step(run, waited, next(numbers))
    measure.synchronize(run.device)
    waited.wait_s, began = 0.0, time.perf_counter()
    for _ in range(timed):
        training.step(run, waited, next(numbers))
    wall_s = time.perf_counter() - began
    return {"samples_per_s": run.config.training.global_batch_size * timed / wall_s, "busy_fraction": 1 - waited.wait_s / wall_s,
            "wait_s": waited.wait_s, "wall_s": wall_s}  # fmt: skip


def measure_reader(model_name: str, shards: str, device: torch.device, *, global_batch: int, micro_batch: int,
                   reader_counts: tuple[int, ...], warmup: int, timed: int) -> dict:  # fmt: skip
    """Samples/s and busy fraction fed from memory and from 1, 2, 4... reader threads."""
    run = training.build(model_name, device, global_batch=global_batch, micro_batch=micro_batch,
                         steps=10**6, fused_adamw=device.type == "cuda", peak_lr=None)  # fmt: skip
    in_memory = training.repeated(training.random_log_mel(run.model, micro_batch, device))
    row = {"model": model_name, "global_batch": global_batch, "micro_batch": micro_batch,
           "in_memory": _fed(run, in_memory, warmup=warmup, timed=timed)}  # fmt: skip
    for count in reader_counts:
        readers = _readers(shards, run, count)
        try:
            row[f"readers_{count}"] = _fed(run, _in_turn(readers), warmup=warmup, timed=timed)
        finally:
            for reader in readers:
                reader.close()
        row[f"readers_{count}"]["vs_in_memory"] = (
            row[f"readers_{count}"]["samples_per_s"] / row["in_memory"]["samples_per_s"]
        )
    return row
