"""`python -m pipeline.evaluate --hear-module PKG.MODULE [--model-file F]`: score an outside model.

Any module implementing the HEAR API (pipeline.evaluate.hear_module) is scored like a study's
checkpoint (pipeline.evaluate.hear_module_run): R on a RankMe pool played as audio, Q on the tasks
with the given probe. Here R needs `--rankme-shards` and `--rankme-crop-frames` (else it is NaN)
and nothing goes to MLflow. To place the module on a study's Q(R) figure, measured on the pool
and probe that study used, run `python -m sweeps.external --hear-module ... --study NAME`
(sweeps.study.external_log), which calls `score_hear_module` below with the study's pool.
"""

from __future__ import annotations

import argparse
import re
import warnings
from pathlib import Path

from pipeline import paths
from pipeline.cli_errors import UserError
from pipeline.evaluate.hear_module import HearModule, load_hear_module
from pipeline.evaluate.hear_module_run import evaluate_hear_module
from pipeline.evaluate.probes.scene import SceneProbe
from pipeline.evaluate.run import EvaluationResult, format_table, write_results
from pipeline.rankme.pool import RankMePool, select_pool


def add_hear_module_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--model-file", default="", help="--hear-module only: the path given to its load_model (weights file or folder)"
    )
    parser.add_argument(
        "--rankme-crop-frames", type=int, default=None,
        help="--hear-module only: RankMe pool crop length in the shards' mel frames (10 ms)",
    )  # fmt: skip


def output_label(args: argparse.Namespace, label: str | None = None) -> str:
    """The name results are filed under (and, in a study, the MLflow run's): the label or the module."""
    text = label or args.hear_module
    if not re.fullmatch(r"[\w.+-]{1,100}", text):
        raise UserError(f"--label {text!r}: use letters, digits and . _ + - only (it names an MLflow run)")
    return text


def pool_from_flags(args: argparse.Namespace) -> RankMePool | None:
    """The pool `--rankme-shards` / `--rankme-crop-frames` / `--rankme-n` name; None when none is given."""
    if not args.rankme_shards:
        return None
    if args.rankme_crop_frames is None:
        raise UserError("--rankme-shards with --hear-module needs --rankme-crop-frames N (the pool's crop length)")
    return select_pool(args.rankme_shards, crop_frames=args.rankme_crop_frames, n=args.rankme_n)


def score_hear_module(
    args: argparse.Namespace,
    probe_training: SceneProbe,
    pool: RankMePool | None,
) -> tuple[EvaluationResult, HearModule, Path]:
    """Load the module named by the flags and score it on `pool` and the tasks; returns the tasks folder too."""
    if args.lid_head != "none":
        raise UserError("--lid-head needs frame embeddings; a HEAR module is scored on scene embeddings only")
    hear = load_hear_module(args.hear_module, args.model_file)
    if pool is None:
        warnings.warn("no RankMe pool (--rankme-shards, or a study's): R is recorded as NaN", stacklevel=2)
    tasks_dir = Path(args.tasks_dir) if args.tasks_dir else paths.default_tasks_dir()
    task_names = None if args.tasks == "all" else [name.strip() for name in args.tasks.split(",") if name.strip()]
    if task_names == []:
        raise UserError(f"--tasks {args.tasks!r} names no task; give 'all' or comma-separated task names")
    result = evaluate_hear_module(
        hear, tasks_dir=str(tasks_dir), task_names=task_names, pool=pool, task_rankme_n=args.task_rankme_n,
        seeds=args.seeds, probe_training=probe_training, progress=lambda line: print(line, flush=True),
    )  # fmt: skip
    return result, hear, tasks_dir


def print_results(result: EvaluationResult, output: Path) -> None:
    json_path, csv_path = write_results(result, output)
    print(format_table(result))
    print(f"results: {json_path} and {csv_path}")


def run_hear_module(args: argparse.Namespace, probe_training: SceneProbe) -> int:
    """The --hear-module branch of `python -m pipeline.evaluate` (see the module doc)."""
    label = output_label(args)
    result, _, _ = score_hear_module(args, probe_training, pool_from_flags(args))
    print_results(result, Path(args.output) if args.output else paths.audioscale_home() / "external" / label)
    return 0
