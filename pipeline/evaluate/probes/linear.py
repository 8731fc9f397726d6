"""Linear probe: logistic regression on standardised scene embeddings, C chosen on validation.

What X-ARES and Dasheng report beside the MLP, as a cheaper and lower-capacity read-out of what a
frozen embedding makes linearly available. Protocol, for one (train, valid, test) fold:

- standardise every dimension with the training split's mean and std (applied to all three splits);
- fit scikit-learn's LogisticRegression (lbfgs, multinomial for multiclass tasks; one binary
  logistic regression per class for multilabel tasks) for every C of `c_grid` (inverse L2 strength);
- score each fit on the validation split with the task's primary metric
  (pipeline.evaluate.probes.metrics.score_predictions), keep the best C (the first, i.e. the most
  regularised, on a tie) and report its test score.

lbfgs from a zero start is deterministic: the probe has no random state, so every seed gives the
same score and the spread over seeds is 0 by construction (`probe_task` fits each fold once). The
chosen C's test score carries a bootstrap over test clips instead (pipeline.evaluate.probes.bootstrap).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import torch
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression

from pipeline.evaluate.probes.bootstrap import bootstrap_test_scores
from pipeline.evaluate.probes.grid import SplitArrays
from pipeline.evaluate.probes.metrics import score_predictions

DEFAULT_C_GRID = (1e-3, 1e-2, 1e-1, 1.0, 10.0)
# A class the training split never shows can never be predicted: its logit is this (finite, so
# metrics that sort scores still work).
ABSENT_CLASS_LOGIT = -1e9


@dataclass(frozen=True, kw_only=True)
class LinearProbeConfig:
    """The linear probe's grid; `schedule` names the probe kind in results ("linear")."""

    schedule: str = "linear"
    c_grid: tuple[float, ...] = DEFAULT_C_GRID  # inverse L2 strengths tried, most regularised first
    max_iter: int = 1000  # lbfgs iterations per fit

    @property
    def probe_name(self) -> str:
        return "linear"


@dataclass(frozen=True, kw_only=True)
class ChosenProbeResult:
    """A grid probe's outcome on one fold: the validation-chosen grid value and its test score."""

    choice: float  # the chosen C (linear) or k (kNN)
    validation_score: float
    test_score: float
    validation_scores: dict[float, float]  # every grid value's validation score
    # The chosen value's test score on resampled test clips (pipeline.evaluate.probes.bootstrap):
    # the noise floor of a probe whose seeds give no spread. None where it was not computed.
    test_bootstrap: np.ndarray | None = field(default=None, compare=False, repr=False)


def standardiser(train: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-dimension mean and std of the training split (std floored, so constant dims stay 0)."""
    return train.mean(axis=0), np.maximum(train.std(axis=0), 1e-6)


def choose_on_validation(
    grid: tuple[float, ...],
    valid_scores: np.ndarray,
    test_scores: np.ndarray,
    *,
    test_bootstrap: Callable[[int], np.ndarray] | None = None,
) -> ChosenProbeResult:
    """The grid value with the best validation score (the first one on a tie) and its test score;
    `test_bootstrap(best_index)`, when given, resamples the chosen value's test outputs."""
    best = int(np.argmax(valid_scores))  # argmax returns the first of equal maxima
    return ChosenProbeResult(
        choice=float(grid[best]),
        validation_score=float(valid_scores[best]),
        test_score=float(test_scores[best]),
        validation_scores={float(value): float(score) for value, score in zip(grid, valid_scores)},
        test_bootstrap=None if test_bootstrap is None else test_bootstrap(best),
    )


def _fit_multiclass(features: np.ndarray, targets: np.ndarray, n_classes: int, c: float, max_iter: int):
    """A function mapping features to (n, n_classes) log-probabilities of one fitted C."""
    seen = np.unique(targets)
    if len(seen) == 1:  # one class in training: it is always predicted

        def constant(x: np.ndarray) -> np.ndarray:
            logits = np.full((len(x), n_classes), ABSENT_CLASS_LOGIT)
            logits[:, seen[0]] = 0.0
            return logits

        return constant
    model = LogisticRegression(C=c, max_iter=max_iter).fit(features, targets)

    def predict(x: np.ndarray) -> np.ndarray:
        logits = np.full((len(x), n_classes), ABSENT_CLASS_LOGIT)
        # log(probability), floored: a saturated fit's probabilities underflow to 0.
        logits[:, model.classes_] = np.maximum(
            np.log(np.maximum(model.predict_proba(x), 1e-300)), ABSENT_CLASS_LOGIT / 2
        )
        return logits

    return predict


def _fit_multilabel(features: np.ndarray, targets: np.ndarray, c: float, max_iter: int):
    """A function mapping features to (n, classes) logits, one binary regression per class; a class
    that is always absent (or always present) in training gets a constant logit."""
    models = []
    for column in targets.T:
        if column.min() == column.max():
            models.append(float(ABSENT_CLASS_LOGIT if column.max() == 0 else -ABSENT_CLASS_LOGIT))
        else:
            models.append(LogisticRegression(C=c, max_iter=max_iter).fit(features, column.astype(int)))

    def predict(x: np.ndarray) -> np.ndarray:
        return np.stack(
            [np.full(len(x), m) if isinstance(m, float) else m.decision_function(x) for m in models], axis=1
        )

    return predict


def run_linear_probe(
    *,
    train: SplitArrays,
    valid: SplitArrays,
    test: SplitArrays,
    n_classes: int,
    metric: str,
    multilabel: bool,
    config: LinearProbeConfig = LinearProbeConfig(),
    class_labels: list[str] | None = None,
) -> ChosenProbeResult:
    """Fit every C on `train`, choose it on `valid`, report its score on `test`."""
    mean, std = standardiser(train.features.numpy().astype(np.float64))
    x_train, x_valid, x_test = ((split.features.numpy() - mean) / std for split in (train, valid, test))
    y_train = train.targets.numpy()
    valid_logits, test_logits = [], []
    with warnings.catch_warnings():
        # A weakly regularised fit on separable data may stop at max_iter; validation judges it anyway.
        warnings.simplefilter("ignore", ConvergenceWarning)
        for c in config.c_grid:
            if multilabel:
                predict = _fit_multilabel(x_train, y_train, c, config.max_iter)
            else:
                predict = _fit_multiclass(x_train, y_train, n_classes, c, config.max_iter)
            valid_logits.append(predict(x_valid))
            test_logits.append(predict(x_test))

    def scores(logits: list[np.ndarray], split: SplitArrays) -> np.ndarray:
        stacked = torch.from_numpy(np.stack(logits).astype(np.float32))  # (grid, n, classes)
        return score_predictions(metric, stacked, split.targets, class_labels=class_labels)

    def resampled(best: int) -> np.ndarray:
        outputs = torch.from_numpy(test_logits[best].astype(np.float32))
        return bootstrap_test_scores(metric, outputs, test.targets, class_labels=class_labels)

    return choose_on_validation(
        config.c_grid, scores(valid_logits, valid), scores(test_logits, test), test_bootstrap=resampled
    )
