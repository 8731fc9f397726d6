"""Command line: build the default pretraining corpus and the labeled tasks, offline.

    python -m pipeline.corpus pretrain --output DIR [--hours 3] [--seed 0] [--tiny]
    python -m pipeline.corpus tasks    --output DIR [--seed 0] [--tiny] [--no-baseline]
    python -m pipeline.corpus baseline --tasks DIR

Both builds read only Debian packages (installed here when running as root; otherwise the
exact apt command is printed), write a completion marker (a second run with the same settings
does nothing), and print timings to the console only, so the output stays byte-identical.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from pathlib import Path

from pipeline.cli.command import Command
from pipeline.cli.errors import UserError
from pipeline.cli.flags import add_flags, check_required, config_from_flags, flag
from pipeline.corpus.sources.default_mix import DEFAULT_TOTAL_HOURS
from pipeline.corpus.sources.pretrain_corpus import (
    PretrainCorpusConfig,
    build_pretrain_corpus,
)
from pipeline.corpus.tasks.build import TasksConfig, build_tasks
from pipeline.evaluate.naive_baseline import format_table, run_baseline
from pipeline.storage.paths import default_corpus_dir, default_tasks_dir

COMMAND = Command("pipeline.corpus", "Build the default pretraining corpus and the labeled tasks, offline.")


@dataclasses.dataclass(frozen=True, kw_only=True)
class PretrainCorpusFlags:
    output: Path | None = flag("--output", None, "corpus directory (default: {corpus_dir})")
    hours: float = flag("--hours", DEFAULT_TOTAL_HOURS, "total hours, split by the per-source budgets")
    seed: int = flag("--seed", 0, "seed of the draw and the synthesis")
    tiny: bool = flag("--tiny", False, "three minutes of audio, for tests")


@dataclasses.dataclass(frozen=True, kw_only=True)
class TasksFlags:
    output: Path | None = flag("--output", None, "tasks directory (default: {tasks_dir})")
    seed: int = flag("--seed", 0, "seed of the clips and the splits")
    tiny: bool = flag("--tiny", False, "a few dozen clips per task, for tests")
    no_baseline: bool = flag("--no-baseline", False, "skip the baseline table")


@dataclasses.dataclass(frozen=True, kw_only=True)
class BaselineFlags:
    tasks: Path | None = flag("--tasks", None, "tasks directory (default: {tasks_dir})")


# subcommand: (its flags, its help line)
SUBCOMMANDS = {
    "pretrain": (PretrainCorpusFlags, "build the default pretraining corpus (16 kHz mono wavs)"),
    "tasks": (TasksFlags, "build the labeled tasks in HEAR format and print the naive baseline"),
    "baseline": (BaselineFlags, "print the naive log-mel baseline for built tasks"),
}


def build_parser() -> argparse.ArgumentParser:
    parser = COMMAND.parser()
    commands = parser.add_subparsers(dest="command", required=True)
    help_values = {"corpus_dir": default_corpus_dir(), "tasks_dir": default_tasks_dir()}
    for name, (flags_class, help_line) in SUBCOMMANDS.items():
        add_flags(commands.add_parser(name, help=help_line), flags_class, help_values=help_values)
    return parser


def parse_arguments(argv: list[str] | None) -> tuple[str, object]:
    """The subcommand's name and its flags."""
    parser = build_parser()
    namespace = parser.parse_args(argv)
    flags_class = SUBCOMMANDS[namespace.command][0]
    check_required(parser, flags_class, namespace, file_holds_it=False)
    return namespace.command, config_from_flags(flags_class, namespace)


def print_baseline(tasks_dir: Path) -> None:
    started = time.perf_counter()
    print(format_table(run_baseline(tasks_dir)))
    print(f"[baseline] {time.perf_counter() - started:.1f} s")


def main(argv: list[str] | None = None) -> int:
    """The command; a user's mistake raises (UserError: an output folder of other settings, missing
    Debian packages, a tasks folder without its index) and `cli` turns it into one line."""
    command, flags = parse_arguments(argv)
    if command == "pretrain":
        build_pretrain_corpus(
            PretrainCorpusConfig(
                output_dir=flags.output or default_corpus_dir(), hours=flags.hours, seed=flags.seed, tiny=flags.tiny
            )
        )
    elif command == "tasks":
        output = flags.output or default_tasks_dir()
        build_tasks(TasksConfig(output_dir=output, seed=flags.seed, tiny=flags.tiny))
        if not flags.no_baseline:
            print_baseline(output)
    else:
        tasks = flags.tasks or default_tasks_dir()
        if not (tasks / "tasks.json").is_file():
            raise UserError(f"{tasks} has no tasks.json; build it with `python -m pipeline.corpus tasks`")
        print_baseline(tasks)
    return 0


def cli() -> int:
    """The `audioscale-corpus` console script: errors through the one handler every command shares."""
    return COMMAND.run(main)


if __name__ == "__main__":
    sys.exit(cli())
