"""Evaluation cost of one debug checkpoint: embedding, probes per task, total, against the target.

    python benchmarks/bench_evaluate.py [--tasks all|t1,t2] [--tasks-dir DIR] [--schedule quick|hear]
        [--lid-head none|self|performer|agent] [--checkpoint DIR] [--seeds 2] [--threads 2]

Times `pipeline.evaluate.run.evaluate_checkpoint` (what `python -m pipeline.evaluate` and every study
trial run) on the default labeled tasks ($AUDIOSCALE_HOME/tasks, built with the same call as
`python -m pipeline.corpus tasks` when missing). The checkpoint is a freshly initialised mae-debug
saved with `pipeline.checkpoint.save_model_checkpoint` unless `--checkpoint` names one; weights do
not change the cost. It has no dataset mel statistics, so embedding standardises each clip instead
(a warning says so): the same arithmetic cost.

Always timed: the quick probe schedule, with the seeds of the CPU study profile (2), against the
target of <= 300 s for all default tasks on 2 CPU cores. `--schedule hear` then also times HEAR's
schedule (tens of minutes per checkpoint on 2 cores: limit it with `--tasks`). `--lid-head` scores
the language-ID tasks with that LID head in both runs. Exits 1 when the quick run misses the target.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import torch

import models
from models.heads.frame_attention import ATTENTION_KINDS
from pipeline.checkpoint import save_model_checkpoint
from pipeline.corpus.tasks.build import TasksConfig, build_tasks
from pipeline.evaluate.probes.grid import probe_schedule
from pipeline.evaluate.probes.lid import LidProbeConfig
from pipeline.evaluate.run import (
    DEFAULT_TASK_RANKME_N,
    EvaluationResult,
    evaluate_checkpoint,
)
from pipeline.storage import paths

TARGET_SECONDS = 300.0
CPU_PROFILE_SEEDS = 2  # sweeps.study.driver's cpu_default profile: quick schedule, 2 seeds


def ensure_tasks(tasks_dir: Path) -> None:
    """Build the default labeled tasks into `tasks_dir` unless it already holds tasks."""
    if not any(tasks_dir.glob("*/task_metadata.json")):
        print(f"[bench] no tasks under {tasks_dir}: building them (python -m pipeline.corpus tasks)")
        build_tasks(TasksConfig(output_dir=tasks_dir))


def fresh_checkpoint(directory: Path, model_name: str) -> Path:
    torch.manual_seed(0)
    model = models.build_model(model_name)
    return save_model_checkpoint(
        directory, model, model_name=model_name, overrides={}, step=0, shard_fingerprint="bench"
    )


def print_timings(label: str, result: EvaluationResult, wall_s: float) -> float:
    """One row per task (embedding s, probe s, probe, score) and the totals; returns the total."""
    print(f"\n{label}: {result.model_name}, {result.seeds} seeds, {torch.get_num_threads()} threads")
    print(f"{'task':<22}{'embed s':>9}{'probe s':>9}  {'probe':<14}{'score':>7}")
    for task, score in result.task_scores.items():
        print(
            f"{task:<22}{result.seconds[f'embed/{task}']:>9.1f}{result.seconds[f'probe/{task}']:>9.1f}  "
            f"{score['probe']:<14}{score['mean']:>7.3f}"
        )
    embed_s = sum(value for key, value in result.seconds.items() if key.startswith("embed/"))
    probe_s = sum(value for key, value in result.seconds.items() if key.startswith("probe/"))
    total_s = result.seconds["total"]
    print(f"{'all tasks':<22}{embed_s:>9.1f}{probe_s:>9.1f}")
    print(f"total {total_s:.1f} s (model load, embedding, probes, RankMe); wall {wall_s:.1f} s; Q {result.q:.3f}")
    return total_s


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", default="all", help="'all' or comma-separated task names")
    parser.add_argument(
        "--tasks-dir", type=Path, default=None, help="None: $AUDIOSCALE_HOME/tasks (built when missing)"
    )
    parser.add_argument(
        "--schedule",
        choices=("quick", "hear"),
        default="quick",
        help="quick: time the quick schedule; hear: time HEAR's schedule too, after it",
    )
    parser.add_argument(
        "--lid-head",
        choices=("none", *ATTENTION_KINDS),
        default="none",
        help="score the language-ID tasks with this LID head instead of the MLP",
    )
    parser.add_argument("--checkpoint", type=Path, default=None, help="None: a freshly initialised --model")
    parser.add_argument("--model", default="mae-debug")
    parser.add_argument("--seeds", type=int, default=CPU_PROFILE_SEEDS)
    parser.add_argument("--task-rankme-n", type=int, default=DEFAULT_TASK_RANKME_N)
    parser.add_argument(
        "--threads", type=int, default=2, help="torch threads with --workers 1 (the target is for 2 CPU cores)"
    )
    parser.add_argument("--workers", type=int, default=2, help="tasks scored at once, one thread each (2 cores: 2)")
    parser.add_argument(
        "--compare-serial",
        action="store_true",
        help="time the quick schedule with one process first, and check both give the same scores",
    )
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    tasks_dir = (args.tasks_dir or paths.default_tasks_dir()).resolve()
    ensure_tasks(tasks_dir)
    task_names = None if args.tasks == "all" else [name.strip() for name in args.tasks.split(",") if name.strip()]
    lid_probe = None if args.lid_head == "none" else LidProbeConfig(attention=args.lid_head)
    schedules = (
        (["quick-serial"] if args.compare_serial else []) + ["quick"] + (["hear"] if args.schedule == "hear" else [])
    )
    with tempfile.TemporaryDirectory(prefix="bench-evaluate-") as scratch:
        checkpoint = args.checkpoint or fresh_checkpoint(Path(scratch) / "checkpoint", args.model)
        totals, scores = {}, {}
        for name in schedules:
            workers = 1 if name == "quick-serial" else args.workers
            started = time.perf_counter()
            result = evaluate_checkpoint(
                checkpoint,
                tasks_dir=tasks_dir,
                task_names=task_names,
                task_rankme_n=args.task_rankme_n,
                seeds=args.seeds,
                probe_training=probe_schedule(name.removesuffix("-serial")),
                lid_probe=lid_probe,
                progress=lambda line: print(line, flush=True),
                workers=workers,
            )
            label = f"{name.removesuffix('-serial')} schedule, {workers} worker process(es)"
            totals[name] = print_timings(label, result, time.perf_counter() - started)
            scores[name] = {task: score["mean"] for task, score in result.task_scores.items()}
    every_task = task_names is None
    verdict = "meets" if totals["quick"] <= TARGET_SECONDS else "MISSES"
    print(
        f"\nquick schedule: {totals['quick']:.1f} s {verdict} the target of <= {TARGET_SECONDS:.0f} s on 2 cores"
        + ("" if every_task else f" (measured on {len(task_names)} task(s), not all: indicative only)")
    )
    if "quick-serial" in totals:
        same = scores["quick-serial"] == scores["quick"]
        print(
            f"{args.workers} worker processes vs 1: {totals['quick-serial'] / totals['quick']:.2f}x faster "
            f"({totals['quick-serial']:.1f} s -> {totals['quick']:.1f} s); scores {'identical' if same else 'DIFFER'}"
        )
    if "hear" in totals:
        print(f"HEAR schedule: {totals['hear']:.1f} s ({totals['hear'] / totals['quick']:.1f}x the quick one)")
    return 0 if totals["quick"] <= TARGET_SECONDS else 1


if __name__ == "__main__":
    raise SystemExit(main())
