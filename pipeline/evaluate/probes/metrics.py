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
        if class_labels is None:
            raise ValueError("chroma_acc needs the class labels (MIDI pitch numbers)")
        try:
            class_pitches = torch.tensor([int(float(label)) for label in class_labels])
        except ValueError as error:
            raise ValueError(f"chroma_acc needs integer MIDI pitch labels, got {class_labels[:5]}...") from error
        return _chroma_accuracy(logits, targets, class_pitches)
    if metric in MULTILABEL_METRICS:
        target_matrix = targets.numpy()
        probabilities = torch.sigmoid(logits).numpy()
        per_config_fn = (lambda t, s: _per_class_mean(t, s, average_precision_score)) if metric == "mAP" else _d_prime
        return np.array([per_config_fn(target_matrix, probabilities[c]) for c in range(len(probabilities))])
    raise ValueError(
        f"unknown task metric {metric!r}; supported: {', '.join(MULTICLASS_METRICS + MULTILABEL_METRICS)}"
    )
