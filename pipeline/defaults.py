"""The embedded defaults: default corpus, labeled tasks and mel shards, built when missing.

Both user commands with no arguments (`python -m pipeline.pretrain`, `python -m sweeps.scaling
--grid ...`) call `ensure_default_data` first. Every step is idempotent through its own completion
marker or manifest, so a second call costs a few file reads.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from pipeline.corpus.sources.pretrain_corpus import (
    PretrainCorpusConfig,
    build_pretrain_corpus,
)
from pipeline.corpus.tasks.build import TasksConfig, build_tasks
from pipeline.prep.run import PrepConfig, run_prep
from pipeline.storage.paths import default_corpus_dir, default_shards_dir, default_tasks_dir, shards_dir_for
from pipeline.storage.uri import child_location


@dataclasses.dataclass(frozen=True, kw_only=True)
class DefaultData:
    corpus_dir: Path
    tasks_dir: Path | None
    shards_dir: Path


def ensure_shards(
    *,
    corpus_dir: str | Path,
    preset_name: str = "audiomae",
    max_hours: float | None = None,
    seed: int = 0,
    ray_address: str | None = None,
    root: str | Path | None = None,
    show_progress: bool = True,
) -> Path | str:
    """Mel shards of `corpus_dir` for one preset and hour budget (a folder, or a URI under a bucket
    `root`); prep reuses finished output."""
    output_dir = shards_dir_for(preset_name=preset_name, max_hours=max_hours, root=root)
    result = run_prep(
        PrepConfig(
            input_path=Path(corpus_dir),
            output_dir=output_dir,
            preset_name=preset_name,
            max_hours=max_hours,
            seed=seed,
            ray_address=ray_address,
            show_progress=show_progress,
        )
    )
    if result.exit_code != 0:
        raise RuntimeError(
            f"prep produced no rows from {corpus_dir}; see {child_location(output_dir, 'rejected.jsonl')}"
        )
    return output_dir


def ensure_default_data(
    *,
    preset_name: str = "audiomae",
    with_tasks: bool = True,
    tiny: bool = False,
    max_hours: float | None = None,
    seed: int = 0,
    ray_address: str | None = None,
) -> DefaultData:
    """Build (when missing) the default corpus, the labeled tasks and the corpus's mel shards.

    `tiny` builds the few-minute versions the tests use, in sibling directories, so a tiny build
    never shadows a full one.
    """
    suffix = "-tiny" if tiny else ""
    corpus_dir = default_corpus_dir().with_name(default_corpus_dir().name + suffix)
    build_pretrain_corpus(PretrainCorpusConfig(output_dir=corpus_dir, seed=seed, tiny=tiny))
    tasks_dir = None
    if with_tasks:
        tasks_dir = default_tasks_dir().with_name(default_tasks_dir().name + suffix)
        build_tasks(TasksConfig(output_dir=tasks_dir, seed=seed, tiny=tiny))
    shards_root = default_shards_dir().with_name(default_shards_dir().name + suffix)
    shards_dir = ensure_shards(
        corpus_dir=corpus_dir,
        preset_name=preset_name,
        max_hours=max_hours,
        seed=seed,
        ray_address=ray_address,
        root=shards_root,
    )
    return DefaultData(corpus_dir=corpus_dir, tasks_dir=tasks_dir, shards_dir=shards_dir)


def build_default_inputs(*, corpus: bool, tasks: bool, seed: int = 0) -> None:
    """Build the default corpus and/or labeled tasks when missing (no-ops once built)."""
    if corpus:
        build_pretrain_corpus(PretrainCorpusConfig(output_dir=default_corpus_dir(), seed=seed))
    if tasks:
        build_tasks(TasksConfig(output_dir=default_tasks_dir(), seed=seed))
