"""The embedded defaults: default corpus, labeled tasks and mel shards, built when missing.

`python -m pipeline.pretrain` with no data arguments calls `ensure_default_data` first; the study
driver (`python -m sweeps.scaling --grid ...`) builds the corpus and its shards while the tasks
build in a child process (`tasks_built_beside`). Every step is idempotent through its own
completion marker or manifest, so a second call costs a few file reads.
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from pipeline.corpus.sources import build_marker, debian
from pipeline.corpus.sources.default_mix import packages_for_pretraining
from pipeline.corpus.sources.pretrain_corpus import (
    PretrainCorpusConfig,
    build_pretrain_corpus,
)
from pipeline.corpus.tasks.build import TasksConfig, build_tasks, packages_for_tasks
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


def build_default_corpus(seed: int = 0) -> None:
    """Build the default pretraining corpus when missing (a no-op once built)."""
    build_pretrain_corpus(PretrainCorpusConfig(output_dir=default_corpus_dir(), seed=seed))


@contextmanager
def tasks_built_beside(
    tasks_dir: str | Path | None, *, seed: int = 0, tiny: bool = False, corpus_meanwhile: bool = False
) -> Iterator[None]:
    """Builds the labeled tasks into `tasks_dir` (None: nothing to build; a finished build is kept) in a
    child process while the `with` body runs, and waits for them at its end; a failed build raises there.

    The tasks need nothing the corpus or its shards make, and each build runs one step at a time on
    one core, so on 2 cores the corpus and its shards (~42 s) are built while the tasks (~56 s) are
    (docs/performance.md). With `corpus_meanwhile` (the body builds the default corpus) both builds'
    Debian packages are checked (installed, as root) here first, so two apt-gets never race for
    dpkg's lock; without it, only the tasks'. The child is this package's own command
    (`python -m pipeline.corpus tasks`), which writes what `build_tasks` writes in this process; its
    lines ("[tasks] ...") interleave with the body's. If the body raises, the child is stopped: a
    half-built tasks folder carries no completion marker, so the next run rebuilds it.
    """
    tasks_dir = Path(tasks_dir).resolve() if tasks_dir is not None else None
    if tasks_dir is None or build_marker.is_complete(
        tasks_dir, TasksConfig(output_dir=tasks_dir, seed=seed, tiny=tiny).settings()
    ):
        yield
        return
    debian.ensure_packages(
        sorted(set(packages_for_tasks()) | set(packages_for_pretraining() if corpus_meanwhile else ()))
    )
    command = [sys.executable, "-m", "pipeline.corpus", "tasks", "--output", str(tasks_dir), "--seed", str(seed),
               "--no-baseline", *(["--tiny"] if tiny else [])]  # fmt: skip
    child = subprocess.Popen(command, env={**os.environ, "PYTHONUNBUFFERED": "1"})  # its lines as they come
    try:
        yield
    except BaseException:
        child.terminate()
        child.wait()
        raise
    if child.wait() != 0:
        raise RuntimeError(
            f"building the labeled tasks in {tasks_dir} failed (exit {child.returncode}; its error is printed "
            f"above); `python {' '.join(command[1:])}` runs that build alone"
        )
