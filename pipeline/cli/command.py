"""One front door for every command: its name, its parser built from a config's flags, its error handler.

    TARGETS = Command("pipeline.targets", "Fit (or reuse) the k-means codebook of a waveform shard set.")
    parser = TARGETS.parser(TargetsConfig)         # one option per flagged field (pipeline.cli.flags)
    config, args = TARGETS.parse(TargetsConfig, argv)
    return TARGETS.run(main)                       # user errors: one line, exit code 2

The command's name is its `python -m` module, and that one string prefixes everything it says when
it refuses: argparse's own usage errors and the user errors `run_cli` catches alike read
`python -m pipeline.targets: error: ...`, so a user can paste the start of the line back.
"""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

from pipeline.cli.errors import run_cli
from pipeline.cli.flags import add_config_file_flag, add_flags, parse_flags


@dataclasses.dataclass(frozen=True)
class Command:
    module: str  # "pipeline.targets": run as `python -m pipeline.targets`
    summary: str  # the first line of --help

    @property
    def prog(self) -> str:
        return f"python -m {self.module}"

    def parser(
        self,
        config_class: type | None = None,
        *,
        help_values: dict[str, Any] | None = None,
        config_file_tables: str | None = None,
        description: str | None = None,
    ) -> argparse.ArgumentParser:
        """The command's parser: one option per flagged field of `config_class` (and its sections);
        `config_file_tables` (e.g. "[pretrain]") adds `--config FILE.toml`."""
        parser = argparse.ArgumentParser(prog=self.prog, description=description or self.summary)
        if config_class is not None:
            add_flags(parser, config_class, help_values=help_values)
        if config_file_tables is not None:
            add_config_file_flag(parser, tables=config_file_tables)
        return parser

    def parse(
        self,
        config_class: type,
        argv: Sequence[str] | None,
        *,
        parser: argparse.ArgumentParser | None = None,
        table: str | None = None,
    ) -> tuple[Any, argparse.Namespace]:
        """The config built from argv (over a --config file's table when the parser has that flag),
        and the namespace for any flag outside the config."""
        return parse_flags(parser or self.parser(config_class), config_class, argv, table=table or self.module)

    def run(self, main: Callable[[list[str]], int], argv: list[str] | None = None) -> int:
        """`main(argv)` behind the shared handler (pipeline.cli.errors.run_cli), prefixed with the command."""
        return run_cli(main, self.prog, argv)
