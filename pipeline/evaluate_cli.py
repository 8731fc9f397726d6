"""`python -m pipeline.evaluate`: score one checkpoint (RankMe + HEAR probes) and log it to MLflow."""

from __future__ import annotations

import argparse
from pathlib import Path

from pipeline import paths
from pipeline.checkpoint import read_checkpoint_meta
from pipeline.evaluate import DEFAULT_EVALUATE_RANKME_N, evaluate_checkpoint, format_table, write_results
from pipeline.evaluate_tracking import checkpoint_dir_of_run, log_evaluation, pretraining_run_id
from pipeline.probe_grid import ProbeTrainingConfig
from pipeline.probes import DEFAULT_SEEDS


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m pipeline.evaluate",
        description="RankMe and HEAR-style probe scores (mean, 95% CI, Q) of a pretrained checkpoint, logged to MLflow.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--checkpoint", help="checkpoint directory (model.safetensors + model.json)")
    source.add_argument("--run-id", help="MLflow id of a pretraining run: evaluates its newest checkpoint")
    parser.add_argument("--tasks", default="all", help="'all' or comma-separated task names")
    parser.add_argument("--tasks-dir", default=None, help="HEAR tasks directory; None: $AUDIOSCALE_HOME/tasks")
    parser.add_argument("--rankme-n", type=int, default=DEFAULT_EVALUATE_RANKME_N, help="scene embeddings RankMe is measured on (seeded sample)")
    parser.add_argument("--seeds", type=int, default=DEFAULT_SEEDS, help="probe repetitions per task (the papers use 10)")
    parser.add_argument("--grid-points", type=int, default=ProbeTrainingConfig().grid_points, help="probe configs sampled per seed out of 16 (HEAR: 8)")
    parser.add_argument("--max-epochs", type=int, default=ProbeTrainingConfig().max_epochs, help="probe epochs at most")
    parser.add_argument("--patience", type=int, default=ProbeTrainingConfig().patience_checks, help="probe validation checks without improvement before stopping")
    parser.add_argument("--tracking-uri", default=None, help="MLflow tracking URI; None: $MLFLOW_TRACKING_URI or the embedded SQLite store")
    parser.add_argument("--output", default=None, help="where evaluation.json / evaluation.csv go; None: <checkpoint>/evaluation")
    parser.add_argument("--device", default="cpu", help="torch device for the embeddings")
    parser.add_argument("--no-mlflow", action="store_true", help="do not log to MLflow")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.seeds < 1 or args.rankme_n < 1:
        raise SystemExit("--seeds and --rankme-n must be positive")
    checkpoint_dir = Path(args.checkpoint) if args.checkpoint else checkpoint_dir_of_run(args.tracking_uri, args.run_id)
    meta = read_checkpoint_meta(checkpoint_dir)
    tasks_dir = Path(args.tasks_dir) if args.tasks_dir else paths.default_tasks_dir()
    task_names = None if args.tasks == "all" else [name.strip() for name in args.tasks.split(",") if name.strip()]
    result = evaluate_checkpoint(
        checkpoint_dir,
        tasks_dir=tasks_dir,
        task_names=task_names,
        rankme_n=args.rankme_n,
        seeds=args.seeds,
        probe_training=ProbeTrainingConfig(
            grid_points=args.grid_points, max_epochs=args.max_epochs, patience_checks=args.patience
        ),
        device=args.device,
        progress=lambda line: print(line, flush=True),
    )
    if not args.no_mlflow:
        result.run_id = log_evaluation(
            result,
            tracking_uri=args.tracking_uri,
            parent_run_id=args.run_id or pretraining_run_id(meta),
            tasks_dir=str(tasks_dir),
        )
    json_path, csv_path = write_results(result, args.output or checkpoint_dir / "evaluation")
    print(format_table(result))
    print(f"results: {json_path} and {csv_path}")
    if result.run_id:
        print(f"MLflow run: {result.run_id}")
    return 0
