"""Aggregate probe scores: per-task mean with a 95% t-interval over seeds, Q, and s(m).

- A task's score is the mean over seeds of the test score; its 95% confidence interval is
  mean +- t(0.975, seeds - 1) * std / sqrt(seeds) (sample std). One seed has no interval: NaN.
- Q is the mean over tasks of the primary score (all primary metrics here lie in [0, 1]).
- Q's 95% interval is the same t-interval over per-seed Q (seed i's scores averaged over tasks).
- s(m) (AudioMAE++ papers, reference/evaluation.md) ranks models on a common task set:
  s(m) = 100 / |T| * sum_t (x_t(m) - min_t) / (max_t - min_t), min and max over the compared models.
  A task on which all models tie carries no ranking information and contributes 0 to every model.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass

import numpy as np
from scipy.stats import t as student_t

CONFIDENCE = 0.95


@dataclass(frozen=True, kw_only=True)
class TaskScore:
    """A task's test score over seeds. `metric` is the task's primary metric; `probe` names what
    produced it ("mlp-hear", "mlp-quick": the HEAR MLP on scene embeddings under that schedule;
    "linear", "knn": the linear and kNN probes on scene embeddings, whose seeds all give the same
    score; "lid-agent" etc.: the language-ID head on frame embeddings, pipeline.evaluate.probes.lid).
    Scores, and Q, compare only between results of the same probe."""

    metric: str
    mean: float
    ci_low: float
    ci_high: float
    seed_scores: tuple[float, ...]
    probe: str = ""

    def to_dict(self) -> dict:
        return asdict(self) | {"seed_scores": list(self.seed_scores)}


def mean_confidence_interval(values: Sequence[float], confidence: float = CONFIDENCE) -> tuple[float, float, float]:
    """(mean, low, high) of a two-sided t-interval; low = high = NaN for a single value."""
    array = np.asarray(values, dtype=np.float64)
    if array.size == 0:
        raise ValueError("a confidence interval needs at least one value")
    mean = float(array.mean())
    if array.size == 1:
        return mean, math.nan, math.nan
    half_width = float(student_t.ppf(0.5 + confidence / 2.0, df=array.size - 1) * array.std(ddof=1) / math.sqrt(array.size))
    return mean, mean - half_width, mean + half_width


def task_score_from_seeds(metric: str, seed_scores: Sequence[float], *, probe: str = "") -> TaskScore:
    mean, low, high = mean_confidence_interval(seed_scores)
    return TaskScore(
        metric=metric, mean=mean, ci_low=low, ci_high=high, seed_scores=tuple(float(s) for s in seed_scores), probe=probe
    )


def quality_q(task_means: Mapping[str, float]) -> float:
    """Q: the mean primary score over tasks, in [0, 1]."""
    if not task_means:
        raise ValueError("Q needs at least one task score")
    values = np.asarray(list(task_means.values()), dtype=np.float64)
    if np.any((values < 0.0) | (values > 1.0)):
        raise ValueError(f"Q averages scores in [0, 1]; got {dict(task_means)} (d_prime is not a valid primary metric for Q)")
    return float(values.mean())


def quality_q_interval(task_scores: Mapping[str, Mapping], confidence: float = CONFIDENCE) -> tuple[float, float]:
    """95% t-interval of Q over probe seeds: Q of seed i is the mean over tasks of seed i's score
    (every task probes seeds 0..n-1). `task_scores`: task -> TaskScore.to_dict(). (NaN, NaN) when
    tasks ran different numbers of seeds or only one seed: there is no per-seed Q to spread.
    """
    per_task = [list(score["seed_scores"]) for score in task_scores.values()]
    if not per_task or len({len(seeds) for seeds in per_task}) != 1:
        return math.nan, math.nan
    per_seed_q = np.mean(np.asarray(per_task, dtype=np.float64), axis=0)  # (seeds,)
    _, low, high = mean_confidence_interval(per_seed_q, confidence)
    return low, high


def normalised_scores(scores_by_model: Mapping[str, Mapping[str, float]]) -> dict[str, float]:
    """s(m) in [0, 100] for each model, over the tasks every model has a score for."""
    if not scores_by_model:
        raise ValueError("s(m) needs at least one model")
    task_sets = [set(scores) for scores in scores_by_model.values()]
    tasks = sorted(set.intersection(*task_sets))
    if not tasks:
        raise ValueError("s(m) needs tasks that every compared model was scored on")
    result = {}
    for model, scores in scores_by_model.items():
        total = 0.0
        for task in tasks:
            column = [other[task] for other in scores_by_model.values()]
            low, high = min(column), max(column)
            if high > low:
                total += (scores[task] - low) / (high - low)
        result[model] = 100.0 * total / len(tasks)
    return result
