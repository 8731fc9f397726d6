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

import dataclasses

from pipeline.cli.command import Command
from pipeline.cli.flags import flag
from pipeline.shards.format import read_manifest
from pipeline.storage.bucket_check import check_bucket
from pipeline.targets.codebook import (
    codebook_dir,
    finished_codebook,
    fit_codebook,
    print_progress,
)
from pipeline.targets.settings import FEATURE_KINDS, TargetSettings

COMMAND = Command("pipeline.targets", __doc__.split("\n\n")[0])
_DEFAULTS = TargetSettings()


@dataclasses.dataclass(frozen=True, kw_only=True)
class TargetsCommandConfig:
    """The command's flags; `settings()` turns them into the fit's `TargetSettings` (HuBERT's k per kind)."""

    shards: str = flag("--shards", None, "a shard directory made with prep --preset waveform", required=True)
    features: str = flag(
        "--features", _DEFAULTS.features, "what to cluster: mfcc = 39-d MFCC + deltas at 100 Hz (HuBERT iteration "
        "1); hubert = a trained HuBERT's layer output (iteration 2, with --teacher)", choices=FEATURE_KINDS,
    )  # fmt: skip
    clusters: int | None = flag("--clusters", None, "k (default: HuBERT's, mfcc 100, hubert 500)")
    teacher: str | None = flag("--teacher", None, "--features hubert: the teacher's checkpoint folder")
    teacher_layer: int | None = flag(
        "--teacher-layer", None, "--features hubert: 1-based block whose output is clustered (default 6, HuBERT BASE)"
    )
    device: str = flag("--device", "cpu", "where the teacher runs (cpu, cuda)")
    crop_frames: int = flag(
        "--crop-frames", _DEFAULTS.crop_frames, "crop length in 20 ms frames, as the model trains (500 = 10 s; "
        "debug sizes 100)",
    )  # fmt: skip
    sample_fraction: float = flag(
        "--sample-fraction", _DEFAULTS.sample_fraction, "fraction of segment rows to draw, one crop each (HuBERT: 10%%)"
    )
    max_sample_crops: int | None = flag(
        "--max-sample-crops", None, "cap on the draw (default: mfcc 20000, hubert 2000)"
    )
    seed: int = flag("--seed", _DEFAULTS.seed, "seed of the draw, the crops and k-means")
    output: str | None = flag(
        "--output", None, "folder or bucket URI to hold the codebook folder (default: SHARDS/targets, in the "
        "bucket for shards in a bucket)",
    )  # fmt: skip
    refit: bool = flag("--refit", False, "fit again even when a finished codebook is cached")

    def settings(self) -> TargetSettings:
        return TargetSettings.for_features(
            self.features, clusters=self.clusters, crop_frames=self.crop_frames,
            sample_fraction=self.sample_fraction, max_sample_crops=self.max_sample_crops, seed=self.seed,
            teacher_checkpoint=self.teacher, teacher_layer=self.teacher_layer,
        )  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    config, _ = COMMAND.parse(TargetsCommandConfig, argv)
    settings = config.settings()
    # A wrong key, a missing bucket or a read-only policy: one line now, not after the fit.
    check_bucket(config.shards, what="--shards", write=config.output is None)
    if config.output is not None:
        check_bucket(config.output, what="--output", write=True)
    directory = codebook_dir(config.shards, settings, config.output)
    if not config.refit and finished_codebook(directory, read_manifest(config.shards)["fingerprint"], settings):
        print_progress(
            f"targets: {directory} already holds this codebook (same shards and settings); --refit redoes it"
        )
    else:
        fit_codebook(config.shards, settings, directory, device=config.device)
    print(directory)
    return 0


def cli() -> int:
    """`python -m` and the console script: user errors one line, exit code 2 (pipeline.cli.command)."""
    return COMMAND.run(main)


if __name__ == "__main__":
    raise SystemExit(cli())
