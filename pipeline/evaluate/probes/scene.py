"""Score one task from cached scene embeddings: the HEAR grid per seed (and per fold), then mean
and 95% confidence interval over seeds (pipeline.evaluate.probes.seeds).

Seeds change the grid sample, the initialisation, the dropout masks and the batch order; the
embeddings stay fixed (they are computed once per task by `pipeline.evaluate.embeddings`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import torch

from pipeline.evaluate.probes.grid import (
    GridResult,
    ProbeTrainingConfig,
    SplitArrays,
    run_probe_grid,
)
from pipeline.evaluate.probes.seeds import score_over_seeds_and_folds
from pipeline.evaluate.scores import TaskScore
from pipeline.evaluate.task_data import ProbeSplit, TaskInfo

DEFAULT_SEEDS = 3


def _concat(splits: Sequence[SplitArrays]) -> SplitArrays:
    return SplitArrays(
        features=torch.cat([s.features for s in splits]), targets=torch.cat([s.targets for s in splits])
    )


def split_arrays(features: np.ndarray, targets: np.ndarray) -> SplitArrays:
    """Wrap numpy scene embeddings (n, dim) and targets into the tensors the probe trains on."""
    if len(features) != len(targets):
        raise ValueError(f"{len(features)} embeddings but {len(targets)} targets")
    target_tensor = torch.from_numpy(targets)
    target_tensor = target_tensor.float() if target_tensor.ndim == 2 else target_tensor.long()
    return SplitArrays(features=torch.from_numpy(np.ascontiguousarray(features, dtype=np.float32)), targets=target_tensor)


def probe_task(
    task: TaskInfo,
    embeddings_by_split: Mapping[str, SplitArrays],
    *,
    seeds: int = DEFAULT_SEEDS,
    training: ProbeTrainingConfig = ProbeTrainingConfig(),
) -> tuple[TaskScore, list[GridResult]]:
    """Test score of the validation-chosen probe, per seed (averaged over folds), with its CI."""

    def score_fold(fold: ProbeSplit, seed: int) -> GridResult:
        return run_probe_grid(
            train=_concat([embeddings_by_split[name] for name in fold.train]),
            valid=embeddings_by_split[fold.valid],
            test=embeddings_by_split[fold.test],
            n_classes=len(task.labels),
            metric=task.primary_metric,
            multilabel=task.multilabel,
            seed=seed,
            training=training,
            class_labels=list(task.labels),
        )

    return score_over_seeds_and_folds(
        task, embeddings_by_split.keys(), seeds=seeds, probe=f"mlp-{training.schedule}", score_fold=score_fold
    )
