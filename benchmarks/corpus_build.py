"""Time the full builds of the default corpus and the labeled tasks (the issue's 10-minute budget).

    python benchmarks/corpus_build.py [--output DIR] [--tiny]

Builds both into fresh directories under DIR (default: a temporary directory, removed after),
then prints wall-clock and CPU seconds (this process plus the sox / fluidsynth / espeak-ng children)
for each, the corpus hours and the baseline table. apt downloads are not included: run once with
the Debian packages installed (scripts/env.sh does it).
"""

from __future__ import annotations

import argparse
import resource
import tempfile
import time
from pathlib import Path

from pipeline.corpus.sources.pretrain_corpus import (
    PretrainCorpusConfig,
    build_pretrain_corpus,
)
from pipeline.corpus.tasks.build import TasksConfig, build_tasks
from pipeline.evaluate.naive_baseline import format_table, run_baseline


def cpu_seconds() -> float:
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def timed(label: str, function, rows: list[str]) -> object:
    wall_started, cpu_started = time.perf_counter(), cpu_seconds()
    result = function()
    rows.append(f"| {label} | {time.perf_counter() - wall_started:.1f} | {cpu_seconds() - cpu_started:.1f} |")
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--output", type=Path, default=None, help="where to build (default: a temporary directory)")
    parser.add_argument("--tiny", action="store_true")
    arguments = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="audioscale-corpus-bench-") as temporary:
        root = arguments.output or Path(temporary)
        rows = ["| build | wall s | cpu s |", "|---|---|---|"]
        corpus = timed(
            "pretrain corpus",
            lambda: build_pretrain_corpus(PretrainCorpusConfig(output_dir=root / "corpus", tiny=arguments.tiny)),
            rows,
        )
        timed("tasks", lambda: build_tasks(TasksConfig(output_dir=root / "tasks", tiny=arguments.tiny)), rows)
        results = timed("baseline", lambda: run_baseline(root / "tasks"), rows)
        print("\n".join(rows))
        print(
            f"corpus: {corpus['total_hours']:.3f} h; "
            + ", ".join(f"{source} {hours:.3f} h" for source, hours in corpus["hours_per_source"].items())
        )
        print(format_table(results))


if __name__ == "__main__":
    main()
