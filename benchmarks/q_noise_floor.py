"""The noise floor of Q: can two evaluated checkpoints (and the naive baseline) be told apart?

The default study's probes are deterministic (kNN, linear: every seed repeats one score), so the
only noise left in Q is which clips the test splits hold. Each task's chosen probe is re-scored on
1,000 resamples of its test clips (pipeline.evaluate.probes.bootstrap). The draws depend only
on the seed and the test split's size, so every source scored on one task is resampled with the
same clips: replicate b of checkpoint A and replicate b of checkpoint B form a paired bootstrap of
their difference (correlated test-clip luck cancels). Q's replicate b is the mean over tasks.

Sources: each `--checkpoints` directory (scored as a study trial scores it: pipeline.evaluate's
embedding, input cache and probes) and the naive baseline's features (log-mel mean and std over
time, pipeline.evaluate.naive_baseline) under the same probe, so every comparison is within one probe.

    python benchmarks/q_noise_floor.py --home ~/audioscale --checkpoints INIT_DIR,BEST_DIR [--probes knn,linear]

Prints per task and for Q: each source's score with its test-clip standard error, and the 95%
interval of each checkpoint's difference to the first checkpoint and to the naive features.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pipeline.evaluate.baselines import naive_splits  # noqa: E402
from pipeline.evaluate.probes.scene import probe_task, scene_probe  # noqa: E402
from pipeline.evaluate.probes.seeds import fold_test_replicates  # noqa: E402
from pipeline.evaluate.task_embeddings import embed_task  # noqa: E402
from pipeline.evaluate.task_jobs import load_embedder  # noqa: E402
from pipeline.task_format.reader import (  # noqa: E402
    TaskInfo,
    list_task_dirs,
    probe_splits,
    read_split_labels,
    read_task_info,
)

NAIVE = "naive features"


def scored(task: TaskInfo, splits: dict, probe: str) -> tuple[float, np.ndarray]:
    """The task's test score under `probe` and its test-clip replicates (folds averaged)."""
    score, results = probe_task(task, splits, seeds=1, training=scene_probe(probe))
    return score.mean, fold_test_replicates(results)


def interval(replicates: np.ndarray) -> str:
    low, high = np.percentile(replicates, [2.5, 97.5])
    verdict = "above" if low > 0 else "below" if high < 0 else "within noise"
    return f"{np.mean(replicates):+.4f} (95% {low:+.4f} to {high:+.4f}: {verdict})"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--home", type=Path, required=True, help="AUDIOSCALE_HOME with the default tasks built")
    parser.add_argument(
        "--checkpoints", required=True, help="comma-separated checkpoint directories; the first is the reference"
    )
    parser.add_argument("--probes", default="knn,linear")
    parser.add_argument("--tasks", default=None, help="comma-separated task names (default: all)")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    started = time.perf_counter()
    tasks = [
        read_task_info(d) for d in list_task_dirs(args.home / "tasks", args.tasks.split(",") if args.tasks else None)
    ]
    checkpoints = [Path(c) for c in args.checkpoints.split(",")]
    embedders = {c: load_embedder(c, "cpu")[0] for c in checkpoints}
    # "mask0.70 step 21": the trial (its folder name before "@") and the checkpoint's step.
    sources = [f"{c.parent.name.split('@')[0]} step {int(c.name.rsplit('_', 1)[-1])}" for c in checkpoints]
    inputs = {task.name: {**{s: embed_task(task, embedders[c]).splits for s, c in zip(sources, checkpoints)},
                          NAIVE: naive_splits(task)} for task in tasks}  # fmt: skip
    print(
        f"[noise floor] embedded {len(tasks)} tasks for {len(sources)} checkpoints and the naive features "
        f"in {time.perf_counter() - started:.0f} s"
    )
    for probe in args.probes.split(","):
        tick = time.perf_counter()
        results = {
            task.name: {s: scored(task, splits, probe) for s, splits in inputs[task.name].items()} for task in tasks
        }
        print(f"\n## probe {probe} ({time.perf_counter() - tick:.0f} s; test-clip bootstrap, 1,000 paired resamples)")
        names = [*sources, NAIVE]
        print("| task | test clips | " + " | ".join(names) + " |")
        print("|---|---|" + "---|" * len(names))
        for task in tasks:
            n_test = sum(len(read_split_labels(task, f.test)) for f in probe_splits(task)) // len(probe_splits(task))
            cells = [f"{results[task.name][s][0]:.3f} +- {np.std(results[task.name][s][1], ddof=1):.3f}" for s in names]
            print(f"| {task.name} | {n_test} | " + " | ".join(cells) + " |")
        q = {s: np.mean([results[t.name][s][0] for t in tasks]) for s in names}
        q_draws = {s: np.mean([results[t.name][s][1] for t in tasks], axis=0) for s in names}
        print("| **Q** | | " + " | ".join(f"**{q[s]:.4f}** +- {np.std(q_draws[s], ddof=1):.4f}" for s in names) + " |")
        for source in sources[1:]:
            print(f"Q({source}) - Q({sources[0]}): {interval(q_draws[source] - q_draws[sources[0]])}")
        for source in sources:
            print(f"Q({source}) - Q({NAIVE}, {probe}): {interval(q_draws[source] - q_draws[NAIVE])}")
            above = [
                t.name for t in tasks if np.percentile(results[t.name][source][1] - results[t.name][NAIVE][1], 2.5) > 0
            ]
            print(
                f"  tasks where {source} is above the naive features beyond noise: {len(above)} of {len(tasks)} {above}"
            )
    print(f"\n[noise floor] {time.perf_counter() - started:.0f} s in all")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
