"""How much of a deterministic probe's score is the luck of the test split: a bootstrap over test clips.

The linear and kNN probes have no random state, so seeds give no spread (pipeline.evaluate.probes.scene)
and a score would carry no interval at all. What still varies is which clips the test split happens
to hold: resampling the test clips with replacement and re-scoring the chosen probe's outputs gives
the sampling distribution of the test score (Efron's nonparametric bootstrap). Its standard
deviation is the task's noise floor: two checkpoints whose scores differ by less than about twice
it cannot be told apart on this test split.

- Accuracy metrics (top1, pitch, chroma) are means of per-clip hits: a replicate is the mean of the
  resampled hits, all replicates in one vectorised draw.
- Multilabel metrics (mAP, d') are recomputed on each resample, fewer of them (sklearn per class).
- The draw is seeded: the same outputs give the same replicates, so results are reproducible.

The probe's choice (k or C, made on validation) is held fixed: the interval is about the test
clips, not about the choice.
"""

from __future__ import annotations

import numpy as np
import torch

from pipeline.evaluate.probes.metrics import MULTILABEL_METRICS, per_clip_hits, score_predictions

N_RESAMPLES = 1000  # accuracy metrics: cheap (one gather), enough for a 95% percentile interval
N_RESAMPLES_MULTILABEL = 200  # mAP / d' refit per resample: their SE, not their tails, is what is used
BOOTSTRAP_SEED = 0


def bootstrap_test_scores(
    metric: str,
    outputs: torch.Tensor,
    targets: torch.Tensor,
    *,
    class_labels: list[str] | None = None,
    n_resamples: int | None = None,
    seed: int = BOOTSTRAP_SEED,
) -> np.ndarray:
    """(n_resamples,) test scores of one probe's `outputs` (n, classes) on resampled test clips."""
    n = len(targets)
    if n < 2:
        raise ValueError(f"a bootstrap over test clips needs at least 2 test clips, got {n}")
    if len(outputs) != n:
        raise ValueError(f"{len(outputs)} outputs but {n} test targets")
    generator = np.random.default_rng(seed)
    if metric not in MULTILABEL_METRICS:
        hits = per_clip_hits(metric, outputs, targets, class_labels=class_labels)  # (n,) 0/1
        draws = generator.integers(0, n, size=(n_resamples or N_RESAMPLES, n))
        return hits[draws].mean(axis=1)
    replicates = []
    for _ in range(n_resamples or N_RESAMPLES_MULTILABEL):
        index = torch.from_numpy(generator.integers(0, n, size=n))
        try:
            replicates.append(score_predictions(metric, outputs[index].unsqueeze(0), targets[index])[0])
        except ValueError:  # a resample with no class holding both positives and negatives: skip it
            continue
    if len(replicates) < 2:
        raise ValueError(f"the test split is too small to bootstrap {metric}: no resample had a scorable class")
    return np.asarray(replicates, dtype=np.float64)


def standard_error(replicates: np.ndarray) -> float:
    """The bootstrap standard error: the replicates' sample standard deviation."""
    return float(np.std(replicates, ddof=1))


def percentile_interval(replicates: np.ndarray, confidence: float = 0.95) -> tuple[float, float]:
    """The (low, high) percentile interval of the replicates."""
    tail = 100.0 * (1.0 - confidence) / 2.0
    low, high = np.percentile(replicates, [tail, 100.0 - tail])
    return float(low), float(high)
