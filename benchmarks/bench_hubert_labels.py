"""HuBERT's on-the-fly labelling against the training step it feeds, on CPU.

The model labels every training crop itself (MFCC of the crop -> nearest centroid,
models/wave/hubert_labels.py) instead of reading label shards. This measures what that costs: the median
of `--repeats` labelling passes over a batch against the median of full training steps (labels +
forward + backward + AdamW) on the same batch, as wall and CPU time, after one warm-up each.
The codebook is random (the cost does not depend on the centroids' values); the crops are random
samples (nor on the audio). One thread by default (`--threads` to change): on a shared machine the
CPU time is the fairer figure.

  python benchmarks/bench_hubert_labels.py                                  # hubert-debug, 8 x 2 s
  python benchmarks/bench_hubert_labels.py --model hubert-base --batch-size 2 --repeats 3   # 10 s crops
  python benchmarks/bench_hubert_labels.py --teacher-layer 2 --clusters 500 # iteration 2: a frozen teacher

With `--teacher-layer L` the labels come from a frozen copy of the model's own architecture cut after
block L (iteration 2; HuBERT BASE uses layer 6 of a BASE teacher): its forward pass is the cost.

Kaldi's MFCC takes one waveform at a time, so labelling is a Python loop over the batch: ~8 ms per
10 s crop on one core, independent of model size; on a GPU the crops would be labelled there too.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import safetensors.torch
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import models
from models.wave.hubert_codebook import CENTROIDS_NAME, CODEBOOK_MANIFEST_NAME
from models.wave.hubert_teacher import (
    TEACHER_WEIGHTS_NAME,
    FrozenHubertTeacher,
    truncated_teacher_config,
)


def random_codebook(directory: Path, clusters: int, model_name: str, teacher_layer: int | None) -> Path:
    """Random MFCC centroids, or a randomly initialised teacher cut after `teacher_layer` and random
    centroids in its width."""
    features: dict = {"kind": "mfcc"}
    dim = 39
    if teacher_layer is not None:
        with torch.device("meta"):
            config = truncated_teacher_config(models.build_model(model_name).config, teacher_layer)
        teacher = FrozenHubertTeacher(config)
        safetensors.torch.save_model(teacher.encoder, str(directory / TEACHER_WEIGHTS_NAME))
        features, dim = {"kind": "hubert", "teacher_config": dataclasses.asdict(config)}, config.encoder_dim
    np.save(directory / CENTROIDS_NAME, np.random.default_rng(0).standard_normal((clusters, dim)).astype(np.float32))
    (directory / CODEBOOK_MANIFEST_NAME).write_text(
        json.dumps({"clusters": clusters, "feature_dim": dim, "features": features})
    )
    return directory


def median_seconds(work, repeats: int) -> tuple[float, float]:
    """Median (wall, CPU) seconds of `work()`, after one warm-up call."""
    wall, cpu = [], []
    for _ in range(repeats + 1):
        wall_start, cpu_start = time.perf_counter(), time.process_time()
        work()
        wall.append(time.perf_counter() - wall_start)
        cpu.append(time.process_time() - cpu_start)
    return statistics.median(wall[1:]), statistics.median(cpu[1:])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="hubert-debug")
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--clusters", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--teacher-layer", type=int, default=None, help="iteration 2: label with a teacher cut here")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    with tempfile.TemporaryDirectory() as folder:
        codebook = random_codebook(Path(folder), args.clusters, args.model, args.teacher_layer)
        model = models.build_model(args.model, codebook=str(codebook))
    batch = torch.randn(args.batch_size, model.spec.crop_frames, 320)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)

    def step() -> None:
        loss = model(batch).loss  # labels the batch inside
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()

    label_wall, label_cpu = median_seconds(lambda: model.label_frames(batch), args.repeats)
    step_wall, step_cpu = median_seconds(step, args.repeats)
    seconds = model.spec.crop_frames * model.spec.frame_hop_ms / 1000
    source = "MFCC" if args.teacher_layer is None else f"teacher block {args.teacher_layer}"
    print(
        f"{args.model}: batch {args.batch_size} x {seconds:g} s crops, {source} labels, k = {args.clusters}, "
        f"{args.threads} thread(s), median of {args.repeats}"
    )
    print(
        f"  labelling      {1000 * label_wall:8.1f} ms wall {1000 * label_cpu:8.1f} ms CPU "
        f"({1000 * label_cpu / args.batch_size:.1f} ms CPU per crop)"
    )
    print(f"  training step  {1000 * step_wall:8.1f} ms wall {1000 * step_cpu:8.1f} ms CPU (labelling included)")
    print(f"  labelling share of the step: {label_wall / step_wall:.1%} wall, {label_cpu / step_cpu:.1%} CPU")


if __name__ == "__main__":
    main()
