"""`python -m pipeline.targets`: fit (or reuse) the k-means codebook of a waveform shard set.

    python -m pipeline.targets --shards DIR [--features mfcc] [--clusters K] [--crop-frames 500]
        [--sample-fraction 0.1] [--max-sample-crops N] [--seed 0] [--output DIR] [--refit]
    python -m pipeline.targets --shards DIR --features hubert --teacher CHECKPOINT_DIR [--teacher-layer 6]
        [--device cuda]
    python -m pipeline.targets --shards "s3://BUCKET/shards?endpoint_override=HOST:PORT&scheme=http"
        (shards in a bucket: the codebook goes to their targets/ folder in the bucket)

Prints the codebook directory on stdout (progress goes to stderr), so a script can capture it.
Exit status: 0 on success, 2 for a usage error (not a waveform shard set, too few frames for K, ...).
"""

from __future__ import annotations

import argparse

from pipeline.cli.errors import run_cli
from pipeline.shards.format import read_manifest
from pipeline.storage.bucket_check import check_bucket
from pipeline.targets.codebook import (
    codebook_dir,
    finished_codebook,
    fit_codebook,
    print_progress,
)
from pipeline.targets.settings import FEATURE_KINDS, TargetSettings


def build_parser() -> argparse.ArgumentParser:
    defaults = TargetSettings()
    parser = argparse.ArgumentParser(prog="python -m pipeline.targets", description=__doc__.split("\n\n")[0])
    parser.add_argument("--shards", required=True, help="a shard directory made with prep --preset waveform")
    parser.add_argument(
        "--features",
        default=defaults.features,
        choices=FEATURE_KINDS,
        help="what to cluster: mfcc = 39-d MFCC + deltas at 100 Hz (HuBERT iteration 1); "
        "hubert = a trained HuBERT's layer output (iteration 2, with --teacher)",
    )
    parser.add_argument("--clusters", type=int, default=None, help="k (default: HuBERT's, mfcc 100, hubert 500)")
    parser.add_argument("--teacher", default=None, help="--features hubert: the teacher's checkpoint folder")
    parser.add_argument(
        "--teacher-layer",
        type=int,
        default=None,
        help="--features hubert: 1-based block whose output is clustered (default 6, HuBERT BASE)",
    )
    parser.add_argument("--device", default="cpu", help="where the teacher runs (cpu, cuda)")
    parser.add_argument(
        "--crop-frames",
        type=int,
        default=defaults.crop_frames,
        help="crop length in 20 ms frames, as the model trains (500 = 10 s; debug sizes 100)",
    )
    parser.add_argument(
        "--sample-fraction",
        type=float,
        default=defaults.sample_fraction,
        help="fraction of segment rows to draw, one crop each (HuBERT: 10%%)",
    )
    parser.add_argument(
        "--max-sample-crops", type=int, default=None, help="cap on the draw (default: mfcc 20000, hubert 2000)"
    )
    parser.add_argument("--seed", type=int, default=defaults.seed, help="seed of the draw, the crops and k-means")
    parser.add_argument(
        "--output",
        default=None,
        help="folder or bucket URI to hold the codebook folder (default: SHARDS/targets, in the bucket for "
        "shards in a bucket)",
    )
    parser.add_argument("--refit", action="store_true", help="fit again even when a finished codebook is cached")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    settings = TargetSettings.for_features(
        args.features, clusters=args.clusters, crop_frames=args.crop_frames, sample_fraction=args.sample_fraction,
        max_sample_crops=args.max_sample_crops, seed=args.seed, teacher_checkpoint=args.teacher,
        teacher_layer=args.teacher_layer,
    )  # fmt: skip
    # A wrong key, a missing bucket or a read-only policy: one line now, not after the fit.
    check_bucket(args.shards, what="--shards", write=args.output is None)
    if args.output is not None:
        check_bucket(args.output, what="--output", write=True)
    directory = codebook_dir(args.shards, settings, args.output)
    if not args.refit and finished_codebook(directory, read_manifest(args.shards)["fingerprint"], settings):
        print_progress(
            f"targets: {directory} already holds this codebook (same shards and settings); --refit redoes it"
        )
    else:
        fit_codebook(args.shards, settings, directory, device=args.device)
    print(directory)
    return 0


def cli() -> int:
    """`python -m` and the console script: user errors one line, exit code 2 (pipeline.cli.errors)."""
    return run_cli(main, "targets")


if __name__ == "__main__":
    raise SystemExit(cli())
