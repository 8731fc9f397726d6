"""kNN probe: cosine nearest neighbours among the training split's scene embeddings, k chosen on
validation. No training at all: it reads how the embedding's geometry groups the labels.

Protocol, for one (train, valid, test) fold:

- optionally standardise every dimension with the training split's mean and std (the default: a
  few large dimensions would otherwise decide every cosine), then L2-normalise every embedding;
- each validation / test clip's neighbours are the training clips of highest cosine similarity;
- a clip's class scores are its k neighbours' label vectors (one-hot, or multi-hot for multilabel
  tasks), averaged with weights: 1 each ("majority") or exp(similarity / temperature)
  ("weighted", DINO's kNN rule with temperature 0.07, which also settles ties towards the nearer
  neighbours); multilabel tasks score each class with this average, multiclass tasks predict its argmax;
- every k of `k_grid` (capped at the training split's size) is scored on the validation split with
  the task's primary metric; the best k (the smallest on a tie) is reported on the test split.

The search (standardising, the similarity products, top-k, the votes) runs on `device`: the GPU
takes a large split's (queries x training clips) products in one pass; scores come back to the CPU.

Deterministic: the probe has no random state, so every seed gives the same score and the spread
over seeds is 0 by construction (`probe_task` scores each fold once). The chosen k's test score
carries a bootstrap over test clips instead (pipeline.evaluate.probes.bootstrap).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from pipeline.evaluate.probes.bootstrap import bootstrap_test_scores
from pipeline.evaluate.probes.grid import SplitArrays
from pipeline.evaluate.probes.linear import ChosenProbeResult, choose_on_validation
from pipeline.evaluate.probes.metrics import score_predictions

DEFAULT_K_GRID = (1, 3, 5, 10, 20, 50)
VOTES = ("majority", "weighted")
QUERY_BATCH = 2048  # queries per similarity matmul, to bound memory on large splits


@dataclass(frozen=True, kw_only=True)
class KnnProbeConfig:
    """The kNN probe's grid and vote; `schedule` names the probe kind in results ("knn")."""

    schedule: str = "knn"
    k_grid: tuple[int, ...] = DEFAULT_K_GRID
    vote: str = "weighted"  # "majority" | "weighted"
    temperature: float = 0.07  # of the weighted vote
    standardise: bool = True  # train-split standardisation before the L2 normalisation

    def __post_init__(self) -> None:
        if self.vote not in VOTES:
            raise ValueError(f"unknown kNN vote {self.vote!r}; choose one of {', '.join(VOTES)}")
        if not self.k_grid or min(self.k_grid) < 1:
            raise ValueError(f"k_grid must hold positive k, got {self.k_grid}")

    @property
    def probe_name(self) -> str:
        return "knn"


def _label_matrix(targets: torch.Tensor, n_classes: int) -> torch.Tensor:
    """(n, classes) float: one-hot class indices, or the multi-hot targets as they are."""
    if targets.ndim == 2:
        return targets.float()
    return F.one_hot(targets.long(), n_classes).float()


@torch.no_grad()
def knn_scores(
    train_features: torch.Tensor,
    train_labels: torch.Tensor,
    queries: torch.Tensor,
    k_grid: tuple[int, ...],
    *,
    vote: str = "weighted",
    temperature: float = 0.07,
) -> torch.Tensor:
    """Class scores (len(k_grid), n_queries, classes) of every k at once, from one top-k search.

    Features must be L2-normalised already (their dot products are the cosine similarities)."""
    k_max = max(k_grid)
    chunks = []
    for start in range(0, len(queries), QUERY_BATCH):
        similarity = queries[start : start + QUERY_BATCH] @ train_features.T  # (q, n_train)
        top_similarity, top_index = similarity.topk(k_max, dim=1)  # sorted, nearest first
        weights = (
            torch.ones_like(top_similarity) if vote == "majority" else torch.exp((top_similarity - 1.0) / temperature)
        )
        weighted_labels = weights.unsqueeze(-1) * train_labels[top_index]  # (q, k_max, classes)
        label_sums = weighted_labels.cumsum(dim=1)  # running sums over the nearest 1..k_max
        weight_sums = weights.cumsum(dim=1)
        chunks.append(torch.stack([label_sums[:, k - 1] / weight_sums[:, k - 1 : k] for k in k_grid]))
    return torch.cat(chunks, dim=1)


def _normalised(features: torch.Tensor, mean: torch.Tensor | None, std: torch.Tensor | None) -> torch.Tensor:
    features = features.double()
    if mean is not None:
        features = (features - mean) / std
    return F.normalize(features, dim=1)


def run_knn_probe(
    *,
    train: SplitArrays,
    valid: SplitArrays,
    test: SplitArrays,
    n_classes: int,
    metric: str,
    config: KnnProbeConfig = KnnProbeConfig(),
    class_labels: list[str] | None = None,
    device: torch.device | str = "cpu",
) -> ChosenProbeResult:
    """Score every k on `valid` with `train` as the neighbours, report the best k's test score."""
    k_grid = tuple(sorted({min(k, len(train.features)) for k in config.k_grid}))
    mean = std = None
    if config.standardise:
        train_double = train.features.to(device).double()
        std, mean = torch.std_mean(train_double, dim=0, unbiased=False)
        std = std.clamp_min(1e-6)
    neighbours = _normalised(train.features.to(device), mean, std)
    labels = _label_matrix(train.targets.to(device), n_classes).double()

    def class_scores(split: SplitArrays) -> torch.Tensor:  # (k_grid, n, classes)
        return (
            knn_scores(
                neighbours,
                labels,
                _normalised(split.features.to(device), mean, std),
                k_grid,
                vote=config.vote,
                temperature=config.temperature,
            )
            .float()
            .cpu()
        )

    def scores(split: SplitArrays, outputs: torch.Tensor) -> np.ndarray:
        # Multilabel metrics apply a sigmoid first: monotone, so rankings (AP, AUC) are unchanged.
        return score_predictions(metric, outputs, split.targets, class_labels=class_labels)

    test_outputs = class_scores(test)

    def resampled(best: int) -> np.ndarray:
        return bootstrap_test_scores(metric, test_outputs[best], test.targets, class_labels=class_labels)

    return choose_on_validation(
        tuple(float(k) for k in k_grid),
        scores(valid, class_scores(valid)),
        scores(test, test_outputs),
        test_bootstrap=resampled,
    )
