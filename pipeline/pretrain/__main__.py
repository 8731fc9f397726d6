"""Command line of `python -m pipeline.pretrain`, and the embedded no-argument default.

With no arguments it builds what is missing (the default corpus with `python -m pipeline.corpus
pretrain`, its shards with `python -m pipeline.prep`), pretrains a debug model on CPU for a few
hundred steps and prints where the MLflow run and the checkpoint are.
"""

from __future__ import annotations

import argparse
import sys

from pipeline.cli.command import Command
from pipeline.cli.flags import config_from_flags, parse_override
from pipeline.defaults import ensure_default_data
from pipeline.pretrain.driver import (
    NonFiniteLossError,
    PretrainConfig,
    PretrainResult,
    run_pretraining,
)
from pipeline.storage import paths

__all__ = ["build_parser", "config_from_args", "main", "parse_override"]

DEFAULT_RUN = PretrainConfig.from_flat(
    model_name="audiomae++-debug",
    steps=300,
    global_batch_size=32,
    num_workers=1,
    base_lr=1.6e-2,  # peak lr 1.6e-2 x 32 / 256 = 2e-3: a 0.1M-parameter model needs it to move in 300 steps
    checkpoint_every_steps=100,
    rankme_every_steps=50,
)


COMMAND = Command(
    "pipeline.pretrain",
    "Masked pretraining on Ray Train, tracked in MLflow. No arguments: the embedded default "
    f"({DEFAULT_RUN.model.model_name}, {DEFAULT_RUN.training.steps} CPU steps on the default corpus, built if missing).",
)


def build_parser() -> argparse.ArgumentParser:
    """One option per PretrainConfig field: flag, type, default and help come from the field."""
    help_values = {
        "shards_root": paths.default_shards_dir(),
        "ray_storage": paths.default_ray_storage_dir(),
        "tracking_uri": paths.default_tracking_uri(),
    }
    return COMMAND.parser(
        PretrainConfig,
        help_values=help_values,
        config_file_tables="[pretrain] (or a section's subtable, e.g. [pretrain.optim])",
    )


def config_from_args(args: argparse.Namespace) -> PretrainConfig:
    return config_from_flags(PretrainConfig, args)


def format_result(result: PretrainResult) -> str:
    rankme = ", ".join(f"{step}: {value:.1f}" for step, value in result.rankme_history)
    return "\n".join(
        [
            f"run {result.run_name}: {result.steps} steps, final loss {result.final_loss:.4f}",
            f"RankMe over training: {rankme or 'not measured'}",
            f"checkpoint: {result.checkpoint_dir}",
            f"MLflow run {result.run_id} in {result.tracking_uri}",
            f"  browse: {_browse_hint(result.tracking_uri)}",
            f"  resume / extend: python -m pipeline.pretrain --run-name {result.run_name} --steps N ...",
        ]
    )


def _browse_hint(tracking_uri: str) -> str:
    """A tracking server already serves the UI; a SQLite store needs `mlflow ui` started on it."""
    if tracking_uri.startswith(("http://", "https://")):
        return f"{tracking_uri}/#/experiments"
    return f"mlflow ui --backend-store-uri {tracking_uri}"


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv:
        config, _ = COMMAND.parse(PretrainConfig, argv, parser=build_parser(), table="pretrain")
    else:
        preset = DEFAULT_RUN.describe_model().spec.frontend_preset
        defaults = ensure_default_data(preset_name=preset, with_tasks=False)
        config = DEFAULT_RUN.replace(shards_dir=str(defaults.shards_dir))
    try:
        result = run_pretraining(config)
    except NonFiniteLossError as error:  # not the user's mistake: exit code 1, not 2
        print(f"{COMMAND.prog}: error: {error}", file=sys.stderr)
        return 1
    print(format_result(result))
    return 0


def cli() -> int:
    """`python -m` and the console script: user errors one line, exit code 2 (pipeline.cli.command)."""
    return COMMAND.run(main)


if __name__ == "__main__":
    raise SystemExit(cli())
