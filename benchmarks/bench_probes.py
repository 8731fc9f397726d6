"""Cost and seed-to-seed spread of Q per scene probe: seconds per checkpoint on the default tasks.

    python benchmarks/bench_probes.py [--probes quick,linear,knn[,hear]] [--seeds 3] [--checkpoint DIR]
        [--tasks all|t1,t2] [--tasks-dir DIR] [--workers 2]

For one checkpoint (a freshly initialised mae-debug saved like benchmarks/bench_evaluate.py does,
unless `--checkpoint` names one), runs `pipeline.evaluate.run.evaluate_checkpoint` once per probe
(`python -m pipeline.evaluate --probe NAME`) on the default labeled tasks ($AUDIOSCALE_HOME/tasks,
built when missing) with `--seeds` seeds, and prints per probe: wall seconds for the checkpoint
(model load, embedding, probes, RankMe: embedding is redone per probe, so the probes' own cost is
the difference between rows, or the summed per-task probe seconds), Q, Q per seed, the standard
deviation of per-seed Q, and the half-width of Q's 95% t-interval over seeds
(pipeline.evaluate.scores.quality_q_interval). linear and knn have no random state: their seeds
repeat one score, so their spread is 0 by construction. hear is HEAR's MLP schedule, ~36x the
quick one: only with --probes ...,hear.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_evaluate import ensure_tasks, fresh_checkpoint  # noqa: E402

from pipeline.evaluate.probes.scene import SCENE_PROBES, scene_probe  # noqa: E402
from pipeline.evaluate.run import EvaluationResult, evaluate_checkpoint  # noqa: E402
from pipeline.evaluate.scores import quality_q_interval  # noqa: E402
from pipeline.storage import paths  # noqa: E402


def seed_spread(result: EvaluationResult) -> tuple[np.ndarray, float, float]:
    """Per-seed Q, its sample std, and the half-width of Q's 95% t-interval over seeds."""
    per_seed_q = np.mean([score["seed_scores"] for score in result.task_scores.values()], axis=0)
    low, high = quality_q_interval(result.task_scores)
    return per_seed_q, float(np.std(per_seed_q, ddof=1)), (high - low) / 2


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--probes", default="quick,linear,knn", help=f"comma-separated, of {', '.join(SCENE_PROBES)}")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--tasks", default="all", help="'all' or comma-separated task names")
    parser.add_argument(
        "--tasks-dir", type=Path, default=None, help="None: $AUDIOSCALE_HOME/tasks (built when missing)"
    )
    parser.add_argument("--checkpoint", type=Path, default=None, help="None: a freshly initialised --model")
    parser.add_argument("--model", default="mae-debug")
    parser.add_argument("--rankme-n", type=int, default=None, help="None: the checkpoint's pool (30,000 or all)")
    parser.add_argument("--workers", type=int, default=2, help="tasks scored at once, one thread each (2 cores: 2)")
    args = parser.parse_args()
    probes = [name.strip() for name in args.probes.split(",") if name.strip()]
    for name in probes:
        scene_probe(name)  # unknown names fail before any work
    tasks_dir = (args.tasks_dir or paths.default_tasks_dir()).resolve()
    ensure_tasks(tasks_dir)
    task_names = None if args.tasks == "all" else [name.strip() for name in args.tasks.split(",") if name.strip()]
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-probes-") as scratch:
        checkpoint = args.checkpoint or fresh_checkpoint(Path(scratch) / "checkpoint", args.model)
        for name in probes:
            started = time.perf_counter()
            result = evaluate_checkpoint(
                checkpoint,
                tasks_dir=tasks_dir,
                task_names=task_names,
                rankme_n=args.rankme_n,
                seeds=args.seeds,
                probe_training=scene_probe(name),
                workers=args.workers,
            )
            wall_s = time.perf_counter() - started
            probe_s = sum(value for key, value in result.seconds.items() if key.startswith("probe/"))
            embed_s = sum(value for key, value in result.seconds.items() if key.startswith("embed/"))
            rows.append((name, result, wall_s, embed_s, probe_s, *seed_spread(result)))
            print(f"[bench] {name}: {wall_s:.1f} s, Q {result.q:.3f}", flush=True)
    model = rows[0][1].model_name
    print(
        f"\n{model} checkpoint, {len(rows[0][1].task_scores)} tasks, {args.seeds} seeds, {args.workers} worker process(es), "
        f"{torch.get_num_threads()} torch threads"
    )
    print(f"{'probe':<8}{'wall s':>8}{'embed s':>9}{'probe s':>9}{'Q':>7}  {'Q per seed':<22}{'std':>7}{'95% hw':>8}")
    for name, result, wall_s, embed_s, probe_s, per_seed_q, std, half_width in rows:
        seeds_text = " ".join(f"{q:.3f}" for q in per_seed_q)
        print(
            f"{name:<8}{wall_s:>8.1f}{embed_s:>9.1f}{probe_s:>9.1f}{result.q:>7.3f}  {seeds_text:<22}{std:>7.4f}{half_width:>8.4f}"
        )
    print("embed s / probe s: summed over tasks (tasks run in parallel workers, so they exceed wall time)")
    print(f"\nper-task score by probe\n{'task':<22}" + "".join(f"{name:>9}" for name, *_ in rows))
    for task in rows[0][1].task_scores:
        print(f"{task:<22}" + "".join(f"{result.task_scores[task]['mean']:>9.3f}" for _, result, *_ in rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
