"""The seeds x folds protocol both probes share: score every fold under seeds 0..seeds-1, average
the folds of each seed, then mean and 95% t-interval over seeds (pipeline.evaluate.scores); for
probes that carry one (linear, kNN), the test-clip bootstrap of the first seed's folds.

A probe supplies only how one (fold, seed) is trained and scored: the MLP grid on scene embeddings
(pipeline.evaluate.probes.scene) or the LID head on frame embeddings (pipeline.evaluate.probes.lid).
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import Protocol, TypeVar

import numpy as np

from pipeline.evaluate.scores import TaskScore, task_score_from_seeds
from pipeline.task_format.reader import ProbeSplit, TaskInfo, probe_splits


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
    replicates = fold_test_replicates(results[: len(folds)])
    return task_score_from_seeds(task.primary_metric, seed_scores, probe=probe, test_replicates=replicates), results


def fold_test_replicates(fold_results: list) -> np.ndarray | None:
    """The task score on resampled test clips, folds averaged replicate by replicate as their scores
    are (each fold's test set resampled independently); None unless every fold carries a bootstrap
    (deterministic probes do: pipeline.evaluate.probes.bootstrap)."""
    draws = [getattr(result, "test_bootstrap", None) for result in fold_results]
    if not draws or any(d is None for d in draws):
        return None
    length = min(len(d) for d in draws)
    return np.mean([np.asarray(d[:length]) for d in draws], axis=0)
