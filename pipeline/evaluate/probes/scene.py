"""Score one task from cached scene embeddings with one scene probe per seed (and per fold), then
mean and 95% confidence interval over seeds (pipeline.evaluate.probes.seeds).

The scene probes (`SceneProbe`, named by `scene_probe`): the HEAR MLP grid under a schedule
("hear" | "appc" | "quick", pipeline.evaluate.probes.grid), the linear probe ("linear",
pipeline.evaluate.probes.linear) and the kNN probe ("knn", pipeline.evaluate.probes.knn).

For the MLP, seeds change the grid sample, the initialisation, the dropout masks and the batch
order; the embeddings stay fixed (they are computed once per task by `pipeline.evaluate.embeddings`).
The linear and kNN probes have no random state: each fold is scored once and every seed repeats
that score, so their spread over seeds is 0 by construction, not by measurement.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import torch

from pipeline.evaluate.probes.grid import (
    PROBE_SCHEDULES,
    GridResult,
    ProbeTrainingConfig,
    SplitArrays,
    run_probe_grid,
)
from pipeline.evaluate.probes.knn import KnnProbeConfig, run_knn_probe
from pipeline.evaluate.probes.linear import (
    ChosenProbeResult,
    LinearProbeConfig,
    run_linear_probe,
)
from pipeline.evaluate.probes.seeds import score_over_seeds_and_folds
from pipeline.evaluate.scores import TaskScore
from pipeline.task_format.reader import ProbeSplit, TaskInfo

DEFAULT_SEEDS = 3

SceneProbe = ProbeTrainingConfig | LinearProbeConfig | KnnProbeConfig
# No random state: every seed repeats one score (a spread of 0 by construction, not by measurement).
DETERMINISTIC_PROBES = ("linear", "knn")
SCENE_PROBES: dict[str, SceneProbe] = {**PROBE_SCHEDULES, "linear": LinearProbeConfig(), "knn": KnnProbeConfig()}


def scene_probe(name: str) -> SceneProbe:
    """The named scene probe: "hear" | "appc" | "quick" (the MLP under that schedule), "linear", "knn"."""
    if name not in SCENE_PROBES:
        raise ValueError(f"unknown probe {name!r}; choose one of {', '.join(SCENE_PROBES)}")
    return SCENE_PROBES[name]


def _concat(splits: Sequence[SplitArrays]) -> SplitArrays:
    return SplitArrays(features=torch.cat([s.features for s in splits]), targets=torch.cat([s.targets for s in splits]))


def split_arrays(features: np.ndarray, targets: np.ndarray) -> SplitArrays:
    """Wrap numpy scene embeddings (n, dim) and targets into the tensors the probe trains on."""
    if len(features) != len(targets):
        raise ValueError(f"{len(features)} embeddings but {len(targets)} targets")
    target_tensor = torch.from_numpy(targets)
    target_tensor = target_tensor.float() if target_tensor.ndim == 2 else target_tensor.long()
    return SplitArrays(
        features=torch.from_numpy(np.ascontiguousarray(features, dtype=np.float32)), targets=target_tensor
    )


def probe_task(
    task: TaskInfo,
    embeddings_by_split: Mapping[str, SplitArrays],
    *,
    seeds: int = DEFAULT_SEEDS,
    training: SceneProbe = ProbeTrainingConfig(),
) -> tuple[TaskScore, list[GridResult | ChosenProbeResult]]:
    """Test score of the validation-chosen probe, per seed (averaged over folds), with its CI.
    `training` picks the probe: an MLP schedule, a LinearProbeConfig or a KnnProbeConfig."""
    deterministic: dict[ProbeSplit, ChosenProbeResult] = {}  # linear / kNN: one result per fold

    def score_fold(fold: ProbeSplit, seed: int) -> GridResult | ChosenProbeResult:
        arrays = {
            "train": _concat([embeddings_by_split[name] for name in fold.train]),
            "valid": embeddings_by_split[fold.valid],
            "test": embeddings_by_split[fold.test],
            "n_classes": len(task.labels),
            "metric": task.primary_metric,
            "class_labels": list(task.labels),
        }
        if isinstance(training, ProbeTrainingConfig):
            return run_probe_grid(**arrays, multilabel=task.multilabel, seed=seed, training=training)
        if fold not in deterministic:
            if isinstance(training, LinearProbeConfig):
                deterministic[fold] = run_linear_probe(**arrays, multilabel=task.multilabel, config=training)
            else:
                deterministic[fold] = run_knn_probe(**arrays, config=training)
        return deterministic[fold]

    return score_over_seeds_and_folds(
        task, embeddings_by_split.keys(), seeds=seeds, probe=probe_name(training), score_fold=score_fold
    )


def probe_name(training: SceneProbe) -> str:
    """How scores name a scene probe: "mlp-<schedule>", "linear" or "knn"."""
    if isinstance(training, ProbeTrainingConfig):
        return f"mlp-{training.schedule}"
    return training.probe_name
