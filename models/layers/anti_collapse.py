"""A penalty against dimensional collapse of a batch of vectors: VICReg's variance and covariance terms.

Bardes, Ponce and LeCun, "VICReg" (ICLR 2022), Sec. 3: v(Z) = mean_j max(0, gamma - sqrt(Var(z_j) + eps))
(Eq. 1, gamma = 1, eps = 1e-4) keeps every dimension's spread across the batch; c(Z) = sum of the
squared off-diagonal covariances / d (Eq. 3-4) decorrelates dimensions. RankMe falls exactly when
these do (few directions carry the variance), so the sum is added to a masked model's loss on its
pooled visible tokens (models/mae/masked_autoencoder.py, `pooled_vc_weight`).
"""

from __future__ import annotations

import torch

VARIANCE_TARGET = 1.0  # gamma, VICReg Sec. 3
VARIANCE_EPS = 1e-4  # epsilon, VICReg Eq. 1


def variance_covariance_penalty(vectors: torch.Tensor) -> torch.Tensor:
    """vectors (batch, dim) -> v(Z) + c(Z), a scalar; needs a batch of at least 2."""
    batch, dim = vectors.shape
    if batch < 2:
        raise ValueError(f"a variance over the batch needs at least 2 vectors, got {batch}")
    centred = vectors.float() - vectors.float().mean(dim=0)
    std = torch.sqrt(centred.var(dim=0) + VARIANCE_EPS)
    variance = torch.relu(VARIANCE_TARGET - std).mean()
    covariance = centred.T @ centred / (batch - 1)
    off_diagonal = covariance - torch.diag(torch.diagonal(covariance))
    return variance + off_diagonal.pow(2).sum() / dim
