"""`python -m pipeline.evaluate`: score one checkpoint (RankMe + HEAR probes) and log it to MLflow."""

from __future__ import annotations

import argparse
import dataclasses
import os
from pathlib import Path

import safetensors
import torch

from models.heads.frame_attention import ATTENTION_KINDS
from pipeline import paths
from pipeline.checkpoint import WEIGHTS_FILE, read_checkpoint_meta
from pipeline.cli_errors import UserError, run_cli
from pipeline.evaluate.hear_module_cli import add_hear_module_arguments, run_hear_module
from pipeline.evaluate.probes.grid import (
    PROBE_SCHEDULES,
    ProbeTrainingConfig,
    full_grid,
)
from pipeline.evaluate.probes.knn import KnnProbeConfig
from pipeline.evaluate.probes.lid import LidProbeConfig
from pipeline.evaluate.probes.linear import LinearProbeConfig
from pipeline.evaluate.probes.scene import (
    DEFAULT_SEEDS,
    SCENE_PROBES,
    SceneProbe,
    scene_probe,
)
from pipeline.evaluate.run import (
    DEFAULT_TASK_RANKME_N,
    evaluate_checkpoint,
    format_table,
    write_results,
)
from pipeline.evaluate.tracking import (
    checkpoint_dir_of_run,
    log_evaluation,
    pretraining_run_id,
)

NO_LID_HEAD = "none"


def _describe_schedule(config: ProbeTrainingConfig) -> str:
    layers = " or ".join(str(n) for n in config.hidden_layer_choices)
    return (
        f"{layers} hidden layer(s) of 1024, {config.grid_points} of {len(full_grid(config.hidden_layer_choices))} "
        f"grid points per seed, <= {config.max_epochs} epochs, patience {config.patience_checks} checks "
        f"every {config.validate_every_epochs} epochs"
    )


def _probe_help() -> str:
    linear, knn = LinearProbeConfig(), KnnProbeConfig()
    return (
        f"scene probe. hear: HEAR 2021's predictor schedule ({_describe_schedule(PROBE_SCHEDULES['hear'])}), "
        "an MLP grid and what the papers report. quick: the same probe family, cut down "
        f"({_describe_schedule(PROBE_SCHEDULES['quick'])}); it exists because HEAR's schedule costs tens of "
        "minutes per checkpoint on 2 CPU cores, too slow to score every trial of a CPU study. "
        "linear: logistic regression on train-standardised embeddings (multinomial; one per class for multilabel "
        f"tasks), C in {list(linear.c_grid)} chosen on validation. knn: cosine kNN on train-standardised, "
        f"L2-normalised embeddings, {knn.vote} vote, k in {list(knn.k_grid)} chosen on validation. linear and knn "
        "are deterministic (every seed gives the same score) and score language-ID tasks on scene embeddings too. "
        "The name is recorded in the results and in MLflow (probe_schedule; each task's <task>/probe); "
        "compare Q only between results of the same probe"
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m pipeline.evaluate",
        description="RankMe and HEAR-style probe scores (mean, 95% CI, Q) of a pretrained checkpoint, logged to MLflow.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--checkpoint", help="checkpoint directory (model.safetensors + model.json)")
    source.add_argument("--run-id", help="MLflow id of a pretraining run: evaluates its newest checkpoint")
    source.add_argument(
        "--hear-module", metavar="PKG.MODULE",
        help="any module implementing the HEAR API (load_model, get_scene_embeddings): R on the RankMe pool as "
        "audio at its sample_rate, Q on the tasks (`python -m sweeps.external` places it on a study)",
    )  # fmt: skip
    parser.add_argument("--tasks", default="all", help="'all' or comma-separated task names")
    parser.add_argument("--tasks-dir", default=None, help="HEAR tasks directory; None: $AUDIOSCALE_HOME/tasks")
    # RankMe R is measured on the RankMe pool (pretraining-domain crops); task-audio RankMe is a diagnostic.
    parser.add_argument(
        "--rankme-shards",
        default=None,
        help="shards the RankMe pool is drawn from; None: the checkpoint's (its training's pool)",
    )
    parser.add_argument(
        "--rankme-n",
        type=int,
        default=None,
        help="crops in the RankMe pool; None: the checkpoint's (30000, or all its shards hold)",
    )
    parser.add_argument(
        "--task-rankme-n",
        type=int,
        default=DEFAULT_TASK_RANKME_N,
        help="task clips the diagnostic task-audio RankMe uses",
    )
    _add_probe_arguments(parser)
    parser.add_argument(
        "--tracking-uri",
        default=None,
        help="MLflow tracking URI; None: $MLFLOW_TRACKING_URI or the embedded SQLite store",
    )
    parser.add_argument(
        "--output", default=None, help="where evaluation.json / evaluation.csv go; None: <checkpoint>/evaluation"
    )
    parser.add_argument("--device", default="cpu", help="torch device for the embeddings")
    parser.add_argument(
        "--workers",
        type=int,
        default=None,
        help="tasks scored at once, in processes of one thread each (same numbers as 1); "
        "default: the CPU cores, at most 4, on CPU; 1 on a GPU",
    )
    parser.add_argument("--no-mlflow", action="store_true", help="do not log to MLflow")
    add_hear_module_arguments(parser)
    return parser


def _add_probe_arguments(parser: argparse.ArgumentParser) -> None:
    """How Q is measured: the scene probe, its repetitions and overrides, the language-ID head."""
    parser.add_argument(
        "--seeds", type=int, default=DEFAULT_SEEDS, help="probe repetitions per task (the papers use 10)"
    )
    parser.add_argument("--probe", choices=list(SCENE_PROBES), default="hear", help=_probe_help())
    parser.add_argument(
        "--grid-points",
        type=int,
        default=None,
        help="MLP override: probe configs sampled per seed; None: the schedule's",
    )
    parser.add_argument(
        "--max-epochs", type=int, default=None, help="MLP override: probe epochs at most; None: the schedule's"
    )
    parser.add_argument(
        "--patience",
        type=int,
        default=None,
        help="MLP override: validation checks without improvement before stopping; None: the schedule's",
    )
    parser.add_argument(
        "--lid-head",
        choices=(NO_LID_HEAD, *ATTENTION_KINDS),
        default=NO_LID_HEAD,
        help="language-ID tasks only (task_metadata.json label_kind 'language': language_real, language_synthetic): "
        "score them with the model zoo's attentive-statistics-pooling head with this attention on frame embeddings "
        f"instead of the MLP on their mean (4 heads, width 64, dropout 0.2, Adam lr 1e-4, <= {LidProbeConfig().max_epochs} "
        "epochs with early stopping on validation accuracy); none: the MLP everywhere. MLP probes (hear, quick) only",
    )


def default_workers(device: str) -> int:
    """One process per CPU core (at most 4: each holds the model and a task's embeddings); one on a GPU."""
    # The cores this process may run on (a container's share), not the host's count.
    return 1 if device != "cpu" else max(1, min(4, len(os.sched_getaffinity(0))))


def probe_training_from(args: argparse.Namespace) -> SceneProbe:
    """The named probe with the explicit MLP overrides applied; bad overrides exit with a message."""
    schedule = scene_probe(args.probe)
    overrides = {
        field: value
        for field, value in (
            ("grid_points", args.grid_points),
            ("max_epochs", args.max_epochs),
            ("patience_checks", args.patience),
        )
        if value is not None
    }
    if not isinstance(schedule, ProbeTrainingConfig):
        if overrides or args.lid_head != NO_LID_HEAD:
            raise SystemExit(
                f"--grid-points, --max-epochs, --patience and --lid-head go with the MLP probes (hear, quick), not {args.probe}"
            )
        return schedule
    if any(value < 1 for value in overrides.values()):
        raise SystemExit("--grid-points, --max-epochs and --patience must be positive")
    grid_size = len(full_grid(schedule.hidden_layer_choices))
    if overrides.get("grid_points", 1) > grid_size:
        raise SystemExit(
            f"--grid-points {overrides['grid_points']}: the {args.probe} schedule's grid has {grid_size} points"
        )
    return dataclasses.replace(schedule, **overrides)


def check_device(device: str) -> None:
    """Refuse a device this machine does not have before any embedding is computed."""
    try:
        kind = torch.device(device).type
    except RuntimeError as error:
        raise UserError(f"--device {device!r} is not a torch device ({error}); use cpu or cuda") from None
    if kind == "cuda" and not torch.cuda.is_available():
        raise UserError(f"--device {device}: no CUDA GPU is visible on this machine; use --device cpu")


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    check_device(args.device)
    if args.seeds < 1 or args.task_rankme_n < 1 or (args.rankme_n is not None and args.rankme_n < 1):
        raise SystemExit("--seeds, --rankme-n and --task-rankme-n must be positive")
    probe_training = probe_training_from(args)
    workers = args.workers if args.workers is not None else default_workers(args.device)
    if workers < 1:
        raise SystemExit("--workers must be positive")
    if args.hear_module:
        return run_hear_module(args, probe_training)
    if args.model_file or args.rankme_crop_frames is not None:
        raise UserError("--model-file and --rankme-crop-frames go with --hear-module")
    checkpoint_dir = Path(args.checkpoint) if args.checkpoint else checkpoint_dir_of_run(args.tracking_uri, args.run_id)
    meta = read_checkpoint_meta(checkpoint_dir)
    tasks_dir = Path(args.tasks_dir) if args.tasks_dir else paths.default_tasks_dir()
    task_names = None if args.tasks == "all" else [name.strip() for name in args.tasks.split(",") if name.strip()]
    if task_names == []:
        raise UserError(f"--tasks {args.tasks!r} names no task; give 'all' or comma-separated task names")
    try:
        result = evaluate_checkpoint(
            checkpoint_dir,
            tasks_dir=tasks_dir,
            task_names=task_names,
            rankme_shards=args.rankme_shards,
            rankme_n=args.rankme_n,
            task_rankme_n=args.task_rankme_n,
            seeds=args.seeds,
            probe_training=probe_training,
            lid_probe=None if args.lid_head == NO_LID_HEAD else LidProbeConfig(attention=args.lid_head),
            device=args.device,
            progress=lambda line: print(line, flush=True),
            workers=workers,
        )
    except safetensors.SafetensorError as error:
        raise UserError(
            f"{checkpoint_dir / WEIGHTS_FILE} cannot be read ({error}): it is damaged or truncated; "
            "evaluate another checkpoint"
        ) from error
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


if __name__ == "__main__":
    raise SystemExit(run_cli(main, "evaluate"))
