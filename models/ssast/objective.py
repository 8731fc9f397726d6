"""SSAST's joint objective over the masked patches of each clip: InfoNCE + weight x MSE.

SSAST (Gong et al., AAAI 2022, Algorithm 1): for the masked positions i of a clip, two heads on the
encoder output O_i give a classification vector c_i and a reconstruction r_i, both in the space of
the flattened input patch x_i (256 values for 16 x 16 or 128 x 2 patches), and

    L_d = -1/N sum_i log( exp(c_i . x_i) / sum_j exp(c_i . x_j) )     j over the clip's masked patches
    L_g =  1/N sum_i mean over values of (r_i - x_i)^2
    L   = L_d + lambda L_g,  lambda = 10.

L_d is the paper's Eq. (1). The reference code (ast_models.py `mpc`) normalises over predictions
for each target instead (`log_softmax(x @ c^T)` along the prediction axis: the transpose of L_d);
its comment of 8/12/2022 (issue #13) notes the difference from Eq. (1), "(likely)
performance-wise similar". We follow Eq. (1): each prediction must pick its own patch out of the
clip's masked patches, the wording of the method.

Dot products are raw (no temperature, no normalisation), as in paper and code.
"""

from __future__ import annotations

from contextlib import nullcontext

import torch
import torch.nn.functional as F
from torch import nn


class PatchPredictionHead(nn.Sequential):
    """Linear(dim, hidden) -> ReLU -> Linear(hidden, patch_values): SSAST's `cpredlayer` and
    `gpredlayer` (two layers; "a single layer has similar performance", reference comment)."""

    def __init__(self, dim: int, hidden_dim: int, patch_values: int) -> None:
        super().__init__(nn.Linear(dim, hidden_dim), nn.ReLU(), nn.Linear(hidden_dim, patch_values))


def masked_patch_info_nce(predictions: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """predictions c, targets x: (batch, n_masked, patch_values) -> L_d, a scalar.

    Row i of each clip's (n_masked, n_masked) score matrix c_i . x_j is a classification over the
    clip's masked patches whose right answer is j = i. Scores in float32: under bf16 autocast a
    256-term dot product of unit-scale values loses the differences the softmax needs.
    """
    if predictions.shape != targets.shape or predictions.ndim != 3:
        raise ValueError(
            f"predictions {tuple(predictions.shape)} and targets {tuple(targets.shape)} must both be "
            "(batch, n_masked, patch_values)"
        )
    device_type = predictions.device.type  # autocast knows cuda and cpu; a meta build has none
    no_autocast = torch.autocast(device_type, enabled=False) if device_type in ("cuda", "cpu") else nullcontext()
    with no_autocast:
        scores = predictions.float() @ targets.float().transpose(1, 2)  # (batch, m, m): c_i . x_j
        log_probs = F.log_softmax(scores, dim=-1)
        return -torch.diagonal(log_probs, dim1=1, dim2=2).mean()


def masked_patch_mse(reconstructions: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """L_g: mean squared error over every value of every masked patch (reference `mpg`)."""
    return ((reconstructions.float() - targets.float()) ** 2).mean()
