"""HEAR task metrics on probe outputs: top1_acc, pitch_acc, chroma_acc, mAP, d_prime.

All scores lie in [0, 1] except d_prime; higher is better for every one of them. Inputs are
logits for several probe configs at once, (configs, n, classes), so a whole grid is scored in one
call. Multiclass targets are class indices (n,); multilabel targets are multi-hot (n, classes).
"""

from __future__ import annotations

import numpy as np
import torch
from scipy.stats import norm
from sklearn.metrics import average_precision_score, roc_auc_score

MULTICLASS_METRICS = ("top1_acc", "pitch_acc", "chroma_acc")
MULTILABEL_METRICS = ("mAP", "d_prime")
SEMITONES_PER_OCTAVE = 12


def _top1_accuracy(logits: torch.Tensor, targets: torch.Tensor) -> np.ndarray:
    return (logits.argmax(dim=-1) == targets.unsqueeze(0)).double().mean(dim=1).numpy()


def _chroma_accuracy(logits: torch.Tensor, targets: torch.Tensor, class_pitches: torch.Tensor) -> np.ndarray:
    predicted_pitch = class_pitches[logits.argmax(dim=-1)]  # (configs, n)
    target_pitch = class_pitches[targets].unsqueeze(0)
    same_chroma = (predicted_pitch % SEMITONES_PER_OCTAVE) == (target_pitch % SEMITONES_PER_OCTAVE)
    return same_chroma.double().mean(dim=1).numpy()


def _per_class_mean(targets: np.ndarray, scores: np.ndarray, score_fn) -> float:
    # Classes with no positive (or no negative) example in this split have no defined score;
    # averaging over the rest is what HEAR does.
    has_both = (targets.sum(axis=0) > 0) & (targets.sum(axis=0) < len(targets))
    if not has_both.any():
        raise ValueError("multilabel metric needs at least one class with both positive and negative examples")
    return float(np.mean([score_fn(targets[:, k], scores[:, k]) for k in np.flatnonzero(has_both)]))


def _d_prime(targets: np.ndarray, scores: np.ndarray) -> float:
    auc = _per_class_mean(targets, scores, roc_auc_score)
    return float(np.sqrt(2.0) * norm.ppf(auc))


def per_clip_hits(
    metric: str,
    logits: torch.Tensor,
    targets: torch.Tensor,
    *,
    class_labels: list[str] | None = None,
) -> np.ndarray:
    """(n,) float64 0/1: whether each clip is right under an accuracy metric (one probe config's
    logits (n, classes)); the metric is their mean. Multilabel metrics are not per-clip means."""
    if metric in MULTILABEL_METRICS:
        raise ValueError(f"{metric} is not a mean of per-clip hits; score resamples with score_predictions")
    if metric not in MULTICLASS_METRICS:
        raise ValueError(
            f"unknown task metric {metric!r}; supported: {', '.join(MULTICLASS_METRICS + MULTILABEL_METRICS)}"
        )
    predicted = logits.argmax(dim=-1)
    if metric == "chroma_acc":
        pitches = _class_pitches(class_labels)
        return (
            ((pitches[predicted] % SEMITONES_PER_OCTAVE) == (pitches[targets] % SEMITONES_PER_OCTAVE)).double().numpy()
        )
    return (predicted == targets).double().numpy()


def _class_pitches(class_labels: list[str] | None) -> torch.Tensor:
    if class_labels is None:
        raise ValueError("chroma_acc needs the class labels (MIDI pitch numbers)")
    try:
        return torch.tensor([int(float(label)) for label in class_labels])
    except ValueError as error:
        raise ValueError(f"chroma_acc needs integer MIDI pitch labels, got {class_labels[:5]}...") from error


def score_predictions(
    metric: str,
    logits: torch.Tensor,
    targets: torch.Tensor,
    *,
    class_labels: list[str] | None = None,
) -> np.ndarray:
    """Score every config: logits (configs, n, classes) -> (configs,) float64."""
    if metric in ("top1_acc", "pitch_acc"):
        return _top1_accuracy(logits, targets)
    if metric == "chroma_acc":
        return _chroma_accuracy(logits, targets, _class_pitches(class_labels))
    if metric in MULTILABEL_METRICS:
        target_matrix = targets.numpy()
        probabilities = torch.sigmoid(logits).numpy()
        per_config_fn = (lambda t, s: _per_class_mean(t, s, average_precision_score)) if metric == "mAP" else _d_prime
        return np.array([per_config_fn(target_matrix, probabilities[c]) for c in range(len(probabilities))])
    raise ValueError(f"unknown task metric {metric!r}; supported: {', '.join(MULTICLASS_METRICS + MULTILABEL_METRICS)}")
