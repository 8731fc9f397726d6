"""The seeds x folds protocol both probes share: score every fold under seeds 0..seeds-1, average
the folds of each seed, then mean and 95% t-interval over seeds (pipeline.evaluate.scores).

A probe supplies only how one (fold, seed) is trained and scored: the MLP grid on scene embeddings
(pipeline.evaluate.probes.scene) or the LID head on frame embeddings (pipeline.evaluate.probes.lid).
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import Protocol, TypeVar

import numpy as np

from pipeline.evaluate.scores import TaskScore, task_score_from_seeds
from pipeline.evaluate.task_data import ProbeSplit, TaskInfo, probe_splits


class FoldResult(Protocol):
    @property
    def test_score(self) -> float: ...


Result = TypeVar("Result", bound=FoldResult)


def score_over_seeds_and_folds(
    task: TaskInfo,
    available_splits: Collection[str],
    *,
    seeds: int,
    probe: str,
    score_fold: Callable[[ProbeSplit, int], Result],
    inputs: str = "embeddings",
) -> tuple[TaskScore, list[Result]]:
    """`score_fold(fold, seed)` for every seed and fold of `task` (seed-major order): the task's
    score per seed (its folds' mean test score) with the CI, and every fold's result.

    `available_splits`: the splits the probe has inputs for; `inputs` names them in the error
    raised when a fold needs one that is missing."""
    if seeds < 1:
        raise ValueError(f"seeds must be at least 1, got {seeds}")
    folds = probe_splits(task)
    missing = sorted({name for fold in folds for name in (*fold.train, fold.valid, fold.test)} - set(available_splits))
    if missing:
        raise ValueError(f"task {task.name}: no {inputs} for split(s) {missing}")
    seed_scores, results = [], []
    for seed in range(seeds):
        fold_results = [score_fold(fold, seed) for fold in folds]
        seed_scores.append(float(np.mean([result.test_score for result in fold_results])))
        results.extend(fold_results)
    return task_score_from_seeds(task.primary_metric, seed_scores, probe=probe), results
