"""Aggregate probe scores: per-task mean with a 95% t-interval over seeds, Q, and s(m).

- A task's score is the mean over seeds of the test score; its 95% confidence interval is
  mean +- t(0.975, seeds - 1) * std / sqrt(seeds) (sample std). One seed has no interval: NaN.
- Q is the mean over tasks of the primary score (all primary metrics here lie in [0, 1]).
- Q's 95% interval is the same t-interval over per-seed Q (seed i's scores averaged over tasks).
- Seeds that repeat one score have no interval over seeds (NaN, never a zero-width interval).
- Deterministic probes (linear, kNN) give every seed one score: their noise is the test split's.
  A task's `test_se` is the bootstrap standard error over its test clips
  (pipeline.evaluate.probes.bootstrap); Q's test-clip interval is Q +- 1.96 sqrt(sum_t se_t^2) / T,
  the tasks' test sets being independent draws (a normal interval on a mean of 7+ scores).
- s(m) (AudioMAE++ papers, reference/evaluation.md) ranks models on a common task set:
  s(m) = 100 / |T| * sum_t (x_t(m) - min_t) / (max_t - min_t), min and max over the compared models.
  A task on which all models tie carries no ranking information and contributes 0 to every model.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass

import numpy as np
from scipy.stats import norm
from scipy.stats import t as student_t

from pipeline.evaluate.probes.bootstrap import percentile_interval, standard_error

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
    # Bootstrap over test clips (deterministic probes): standard error and 95% percentile interval
    # of the test score, the folds' replicates averaged as their scores are. NaN where not computed.
    test_se: float = math.nan
    test_ci_low: float = math.nan
    test_ci_high: float = math.nan

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
    half_width = float(
        student_t.ppf(0.5 + confidence / 2.0, df=array.size - 1) * array.std(ddof=1) / math.sqrt(array.size)
    )
    return mean, mean - half_width, mean + half_width


def seed_interval(values: Sequence[float], confidence: float = CONFIDENCE) -> tuple[float, float, float]:
    """(mean, low, high) over seeds; NaN bounds where the seeds repeat one value: seeds that all
    agree (a deterministic probe, or a tiny task every seed scores perfectly) are not replicates,
    and a zero-width interval would claim a certainty nobody measured."""
    mean, low, high = mean_confidence_interval(values, confidence)
    if np.ptp(np.asarray(values, dtype=np.float64)) == 0.0:
        return mean, math.nan, math.nan
    return mean, low, high


def task_score_from_seeds(
    metric: str, seed_scores: Sequence[float], *, probe: str = "", test_replicates: np.ndarray | None = None
) -> TaskScore:
    """`test_replicates`: the test score on resampled test clips (deterministic probes), or None.

    A deterministic probe's interval is its test-clip interval only: its seeds repeat one score."""
    mean, low, high = seed_interval(seed_scores)
    if test_replicates is not None:
        low = high = math.nan
    test = {}
    if test_replicates is not None and len(test_replicates) > 1:
        test_low, test_high = percentile_interval(test_replicates, CONFIDENCE)
        test = {"test_se": standard_error(test_replicates), "test_ci_low": test_low, "test_ci_high": test_high}
    return TaskScore(
        metric=metric,
        mean=mean,
        ci_low=low,
        ci_high=high,
        seed_scores=tuple(float(s) for s in seed_scores),
        probe=probe,
        **test,
    )


def quality_q(task_means: Mapping[str, float]) -> float:
    """Q: the mean primary score over tasks, in [0, 1]."""
    if not task_means:
        raise ValueError("Q needs at least one task score")
    values = np.asarray(list(task_means.values()), dtype=np.float64)
    if np.any((values < 0.0) | (values > 1.0)):
        raise ValueError(
            f"Q averages scores in [0, 1]; got {dict(task_means)} (d_prime is not a valid primary metric for Q)"
        )
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
    _, low, high = seed_interval(per_seed_q, confidence)
    return low, high


def quality_q_test_interval(task_scores: Mapping[str, Mapping], confidence: float = CONFIDENCE) -> tuple[float, float]:
    """95% interval of Q from the tasks' test-clip bootstrap: Q +- z sqrt(sum se_t^2) / T. `task_scores`:
    task -> TaskScore.to_dict(). (NaN, NaN) unless every task has a finite `test_se`."""
    errors = np.asarray([score.get("test_se", math.nan) for score in task_scores.values()], dtype=np.float64)
    if errors.size == 0 or not np.all(np.isfinite(errors)):
        return math.nan, math.nan
    q = float(np.mean([score["mean"] for score in task_scores.values()]))
    half_width = float(norm.ppf(0.5 + confidence / 2.0) * np.sqrt(np.sum(errors**2)) / errors.size)
    return q - half_width, q + half_width


def quality_q_replicates(task_replicates: Sequence[np.ndarray | None]) -> tuple[float, ...]:
    """Q on each test-clip bootstrap resample: the tasks' replicate b averaged, as Q averages their
    scores, over the first B replicates of every task (B the fewest any task has). Replicate b of a
    task is the same resample for every model scored on it: the draws are seeded by the test split
    alone, and a multilabel task skips the same unscorable resamples (those depend on its labels
    only), so Q's replicates pair across models too. () when a task has none (a seeded probe)."""
    if not task_replicates or any(r is None or len(r) < 2 for r in task_replicates):
        return ()
    count = min(len(r) for r in task_replicates)
    stacked = np.asarray([np.asarray(r[:count], dtype=np.float64) for r in task_replicates])
    return tuple(float(v) for v in stacked.mean(axis=0))


def paired_interval(
    a: Sequence[float], b: Sequence[float], confidence: float = CONFIDENCE
) -> tuple[float, float] | None:
    """Percentile interval of Q(a) - Q(b) over paired test-clip replicates (replicate i of both resamples
    the same clips, so the luck of the test split cancels); None when the two cannot be paired."""
    if len(a) < 2 or len(a) != len(b):
        return None
    low, high = percentile_interval(np.asarray(a, np.float64) - np.asarray(b, np.float64), confidence)
    return float(low), float(high)


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
