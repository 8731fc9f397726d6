"""Command line of `python -m pipeline.pretrain`, and the embedded no-argument default.

With no arguments it builds what is missing (the default corpus with `python -m pipeline.corpus
pretrain`, its shards with `python -m pipeline.prep`), pretrains a debug model on CPU for a few
hundred steps and prints where the MLflow run and the checkpoint are.
"""

from __future__ import annotations

import argparse
import json
import sys

import models
from pipeline import paths
from pipeline.defaults import ensure_default_data
from pipeline.pretrain.data import ShardMismatchError
from pipeline.pretrain.driver import (
    NonFiniteLossError,
    PretrainConfig,
    PretrainResult,
    run_pretraining,
)

DEFAULT_RUN = PretrainConfig(
    model_name="audiomae++-debug",
    steps=300,
    global_batch_size=32,
    num_workers=1,
    base_lr=1.6e-2,  # peak lr 1.6e-2 x 32 / 256 = 2e-3: a 0.1M-parameter model needs it to move in 300 steps
    checkpoint_every_steps=100,
    rankme_every_steps=50,
)


def build_parser() -> argparse.ArgumentParser:
    d = PretrainConfig()
    parser = argparse.ArgumentParser(
        prog="python -m pipeline.pretrain",
        description="Masked pretraining on Ray Train, tracked in MLflow. No arguments: the embedded "
        f"default ({DEFAULT_RUN.model_name}, {DEFAULT_RUN.steps} CPU steps on the default corpus, built if missing).",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    add = parser.add_argument
    add("--model", default=d.model_name, help="model name; `python -m models --list` shows them")
    add("--override", action="append", default=[], metavar="KEY=VALUE",
        help="model config field, value parsed as JSON when it can be (repeatable), e.g. decoder=\"cross\"")
    add("--mask-ratio", type=float, default=d.mask_ratio, help="fraction of patches removed (default: the model's)")
    add("--shards", default=d.shards_dir, help=f"shard directory or URI from pipeline.prep.run (default: {paths.default_shards_dir()}/<model's front-end preset>)")
    add("--rankme-shards", default=d.rankme_shards_dir, help="held-out shards for RankMe (default: a training sample)")
    add("--steps", type=int, default=d.steps, help="optimizer steps in total (a resumed run continues up to this)")
    add("--batch-size", type=int, default=d.global_batch_size, help="global batch size (crops per optimizer step)")
    add("--micro-batch-size", type=int, default=d.micro_batch_size,
        help="crops per worker per forward pass; smaller than batch/workers means gradient accumulation")
    add("--lr", type=float, default=d.base_lr, help="base lr; peak lr = lr x batch / 256 x model lr_scale")
    add("--weight-decay", type=float, default=d.weight_decay)
    add("--warmup-steps", type=int, default=d.warmup_steps, help="linear warmup steps (default: 10%% of --steps)")
    add("--min-lr-ratio", type=float, default=d.min_lr_ratio, help="cosine floor as a fraction of the peak lr")
    add("--grad-clip-norm", type=float, default=d.grad_clip_norm)
    add("--seed", type=int, default=d.seed)
    add("--num-workers", type=int, default=d.num_workers, help="data-parallel Ray Train workers")
    add("--use-gpu", action="store_true", help="one GPU per worker, NCCL, bf16 autocast")
    add("--cpus-per-worker", type=float, default=d.cpus_per_worker, help="default: the cluster's CPUs shared out")
    add("--spread", action="store_true", help="place workers on different nodes (placement strategy SPREAD)")
    add("--compile", action="store_true", help="torch.compile the model")
    add("--run-name", default=d.run_name, help="same name again resumes that run (default: <model>-<UTC time>)")
    add("--storage-path", default=d.storage_path,
        help=f"Ray run storage; shared (NFS, s3://, gs://) on clusters (default: {paths.default_ray_storage_dir()})")
    add("--tracking-uri", default=d.tracking_uri,
        help=f"MLflow tracking URI (default: $MLFLOW_TRACKING_URI or {paths.default_tracking_uri()})")
    add("--experiment", default=d.experiment_name, help="MLflow experiment name")
    add("--address", default=d.ray_address, help="Ray address; auto = the `ray start` cluster here (default: $RAY_ADDRESS or a new local Ray)")
    add("--log-every", type=int, default=d.log_every_steps, help="steps between metric logs")
    add("--checkpoint-every", type=int, default=d.checkpoint_every_steps, help="steps between checkpoints")
    add("--rankme-every", type=int, default=d.rankme_every_steps, help="steps between RankMe measurements (0: off)")
    add("--rankme-clips", type=int, default=d.rankme_num_clips, help="crops RankMe is measured on")
    add("--keep-checkpoints", type=int, default=d.num_checkpoints_to_keep)
    add("--max-failures", type=int, default=d.max_failures, help="worker-group restarts before giving up")
    return parser


def parse_override(text: str) -> tuple[str, object]:
    key, sep, raw = text.partition("=")
    if not sep or not key:
        raise SystemExit(f"--override expects KEY=VALUE, got {text!r}")
    try:
        return key, json.loads(raw)
    except json.JSONDecodeError:
        return key, raw  # a bare string such as decoder=cross


def config_from_args(args: argparse.Namespace) -> PretrainConfig:
    return PretrainConfig(
        model_name=args.model,
        model_overrides=dict(parse_override(text) for text in args.override),
        mask_ratio=args.mask_ratio,
        shards_dir=args.shards,
        rankme_shards_dir=args.rankme_shards,
        steps=args.steps,
        global_batch_size=args.batch_size,
        micro_batch_size=args.micro_batch_size,
        base_lr=args.lr,
        weight_decay=args.weight_decay,
        warmup_steps=args.warmup_steps,
        min_lr_ratio=args.min_lr_ratio,
        grad_clip_norm=args.grad_clip_norm,
        seed=args.seed,
        num_workers=args.num_workers,
        use_gpu=args.use_gpu,
        cpus_per_worker=args.cpus_per_worker,
        placement_strategy="SPREAD" if args.spread else "PACK",
        compile_model=args.compile,
        ray_address=args.address,
        run_name=args.run_name,
        storage_path=args.storage_path,
        tracking_uri=args.tracking_uri,
        experiment_name=args.experiment,
        log_every_steps=args.log_every,
        checkpoint_every_steps=args.checkpoint_every,
        rankme_every_steps=args.rankme_every,
        rankme_num_clips=args.rankme_clips,
        num_checkpoints_to_keep=args.keep_checkpoints,
        max_failures=args.max_failures,
    )


def format_result(result: PretrainResult) -> str:
    rankme = ", ".join(f"{step}: {value:.1f}" for step, value in result.rankme_history)
    return "\n".join(
        [
            f"run {result.run_name}: {result.steps} steps, final loss {result.final_loss:.4f}",
            f"RankMe over training: {rankme or 'not measured'}",
            f"checkpoint: {result.checkpoint_dir}",
            f"MLflow run {result.run_id} in {result.tracking_uri}",
            f"  browse: mlflow ui --backend-store-uri {result.tracking_uri}",
            f"  resume / extend: python -m pipeline.pretrain --run-name {result.run_name} --steps N ...",
        ]
    )


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv:
        config = config_from_args(build_parser().parse_args(argv))
    else:
        preset = models.build_model(DEFAULT_RUN.model_name).spec.frontend_preset
        defaults = ensure_default_data(preset_name=preset, with_tasks=False)
        config = PretrainConfig(**{**DEFAULT_RUN.to_dict(), "shards_dir": str(defaults.shards_dir)})
    try:
        result = run_pretraining(config)
    except (NonFiniteLossError, ShardMismatchError, FileNotFoundError, ValueError) as error:
        print(f"pretrain: error: {error}", file=sys.stderr)
        return 1
    print(format_result(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
