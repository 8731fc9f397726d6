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
import sys
import time
from pathlib import Path

from pipeline.cli.errors import UserError, run_cli
from pipeline.corpus.sources.default_mix import DEFAULT_TOTAL_HOURS
from pipeline.corpus.sources.pretrain_corpus import (
    PretrainCorpusConfig,
    build_pretrain_corpus,
)
from pipeline.corpus.tasks.build import TasksConfig, build_tasks
from pipeline.evaluate.naive_baseline import format_table, run_baseline
from pipeline.storage.paths import default_corpus_dir, default_tasks_dir


def parse_arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m pipeline.corpus", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    pretrain = commands.add_parser("pretrain", help="build the default pretraining corpus (16 kHz mono wavs)")
    pretrain.add_argument(
        "--output", type=Path, default=default_corpus_dir(), help="corpus directory (default: %(default)s)"
    )
    pretrain.add_argument(
        "--hours", type=float, default=DEFAULT_TOTAL_HOURS, help="total hours, split by the per-source budgets"
    )
    pretrain.add_argument("--seed", type=int, default=0)
    pretrain.add_argument("--tiny", action="store_true", help="three minutes of audio, for tests")
    tasks = commands.add_parser("tasks", help="build the labeled tasks in HEAR format and print the naive baseline")
    tasks.add_argument(
        "--output", type=Path, default=default_tasks_dir(), help="tasks directory (default: %(default)s)"
    )
    tasks.add_argument("--seed", type=int, default=0)
    tasks.add_argument("--tiny", action="store_true", help="a few dozen clips per task, for tests")
    tasks.add_argument("--no-baseline", action="store_true", help="skip the baseline table")
    baseline = commands.add_parser("baseline", help="print the naive log-mel baseline for built tasks")
    baseline.add_argument(
        "--tasks", type=Path, default=default_tasks_dir(), help="tasks directory (default: %(default)s)"
    )
    return parser.parse_args(argv)


def print_baseline(tasks_dir: Path) -> None:
    started = time.perf_counter()
    print(format_table(run_baseline(tasks_dir)))
    print(f"[baseline] {time.perf_counter() - started:.1f} s")


def main(argv: list[str] | None = None) -> int:
    """The command; a user's mistake raises (UserError: an output folder of other settings, missing
    Debian packages, a tasks folder without its index) and `cli` turns it into one line."""
    arguments = parse_arguments(argv)
    if arguments.command == "pretrain":
        build_pretrain_corpus(
            PretrainCorpusConfig(
                output_dir=arguments.output, hours=arguments.hours, seed=arguments.seed, tiny=arguments.tiny
            )
        )
    elif arguments.command == "tasks":
        build_tasks(TasksConfig(output_dir=arguments.output, seed=arguments.seed, tiny=arguments.tiny))
        if not arguments.no_baseline:
            print_baseline(arguments.output)
    else:
        if not (arguments.tasks / "tasks.json").is_file():
            raise UserError(f"{arguments.tasks} has no tasks.json; build it with `python -m pipeline.corpus tasks`")
        print_baseline(arguments.tasks)
    return 0


def cli() -> int:
    """The `audioscale-corpus` console script: errors through the one handler every command shares."""
    return run_cli(main, "corpus")


if __name__ == "__main__":
    sys.exit(cli())
