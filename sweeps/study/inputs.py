"""The inputs a study's trials need, built once before they run: the embedded defaults the user did
not replace (the default corpus, and the labeled tasks in a child process meanwhile:
pipeline.defaults.tasks_built_beside) and the shard sets of the grid's presets and hour budgets."""

from __future__ import annotations

from collections.abc import Callable

from pipeline.defaults import build_default_corpus, tasks_built_beside
from pipeline.storage import paths
from sweeps.study.config import StudyConfig
from sweeps.study.context import StudyContext
from sweeps.study.grids import TrialSpec
from sweeps.study.trainable import existing_shard_sets, prepare_study_shards


def prepare_study_inputs(
    config: StudyConfig, trials: list[TrialSpec], context: StudyContext, say: Callable[[str], None]
) -> None:
    """Build (or find built) the corpus, tasks and shards the trials read."""
    say("checking the corpus, tasks and shards the trials need (built once, then reused)")
    # --shards without --corpus: shard sets already there (prepped into a bucket) are used as they are.
    present = (
        existing_shard_sets(trials, context.shards_root)
        if config.shards_root is not None and config.corpus_dir is None
        else None
    )
    build_corpus = config.corpus_dir is None and present is None
    with tasks_built_beside(
        paths.default_tasks_dir() if config.tasks_dir is None else None, corpus_meanwhile=build_corpus
    ):
        if build_corpus:
            build_default_corpus()
        if present is None:
            prepare_study_shards(trials, corpus_dir=context.corpus_dir, shards_root=context.shards_root)
        else:
            say(f"using the {len(present)} shard set(s) already under --shards as they are (no --corpus given)")
