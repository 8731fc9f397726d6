"""RankMe: the effective rank of an embedding matrix (Garrido et al. 2023).

Definition (reference/evaluation.md): for Z with N rows (samples) and K columns (features), raw and
not centred, take its singular values sigma_k, p_k = sigma_k / sum(sigma) + eps, and
RankMe = exp(-sum_k p_k log p_k). It ranges from 1 to min(N, K) and depends on N, so a value is
only comparable to others with the same N and K: `rankme_with_shape` and `RankMeValue` carry them.

Speed: the singular values of Z are the square roots of the eigenvalues of the smaller Gram
matrix (Z^T Z, K x K, when N > K). Accumulating it in float64 and running a symmetric eigensolver
is 5-10x cheaper than an SVD of Z for N >> K, and float64 keeps the value equal to the direct SVD's
to about 1e-9 relative. A tensor on a CUDA GPU stays there: the same float64 Gram and eigensolver run
on its device (`singular_values_on_device`), and only the K singular values come back.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

# Garrido et al. 2023 (the RankMe paper) used 25,600 samples; the scaling study (Deng et al.) used
# 30,000, which is what the RankMe pool takes (pipeline.rankme.pool.PAPER_RANKME_N). Only the
# default of `sample_fixed_n` when no N is passed.
DEFAULT_RANKME_N = 25_600
DEFAULT_EPS = 1e-7
# Use the Gram route once the long side is at least this many times the short side; below that
# a direct SVD is cheap and the Gram route saves little.
GRAM_MIN_ASPECT_RATIO = 2.0
# Rows converted to float64 at a time: bounds the extra memory to 8 MiB per 1024 features.
GRAM_CHUNK_ROWS = 8192


@dataclass(frozen=True, kw_only=True)
class RankMeValue:
    """A RankMe value together with the matrix shape it was computed on (it depends on N)."""

    value: float
    n_samples: int
    n_features: int


def _as_float_matrix(embeddings: np.ndarray | torch.Tensor) -> np.ndarray:
    if isinstance(embeddings, torch.Tensor):
        embeddings = embeddings.detach().to("cpu", copy=False)
        if embeddings.dtype not in (torch.float32, torch.float64):
            embeddings = embeddings.float()
        embeddings = embeddings.numpy()
    matrix = np.asarray(embeddings)
    if matrix.ndim != 2:
        raise ValueError(
            f"rankme expects a 2-D (samples, features) matrix, got shape {matrix.shape}; "
            "pool frame embeddings or reshape to (N, K) first"
        )
    if matrix.shape[0] == 0 or matrix.shape[1] == 0:
        raise ValueError(f"rankme got an empty matrix of shape {matrix.shape}")
    if not np.issubdtype(matrix.dtype, np.floating):
        matrix = matrix.astype(np.float64)
    if not np.all(np.isfinite(matrix)):
        raise ValueError("rankme got NaN or infinite embeddings; check the model's outputs")
    return matrix


def _gram_float64(matrix: np.ndarray) -> np.ndarray:
    """Z^T Z for a tall Z (rows >= columns), accumulated in float64 over row chunks."""
    n_rows, n_cols = matrix.shape
    gram = np.zeros((n_cols, n_cols), dtype=np.float64)
    for start in range(0, n_rows, GRAM_CHUNK_ROWS):
        chunk = np.ascontiguousarray(matrix[start : start + GRAM_CHUNK_ROWS], dtype=np.float64)
        # `chunk.T @ chunk` lets numpy call BLAS syrk (only one triangle): half the work of a gemm.
        gram += chunk.T @ chunk
    return gram


def _on_cuda(embeddings: np.ndarray | torch.Tensor) -> bool:
    """CUDA tensors take the device route; other accelerators (MPS has no float64) are read back to the CPU."""
    return isinstance(embeddings, torch.Tensor) and embeddings.device.type == "cuda"


def singular_values_on_device(embeddings: torch.Tensor) -> np.ndarray:
    """`singular_values` computed on the tensor's own device (float64 there), returned as numpy."""
    if embeddings.ndim != 2 or 0 in embeddings.shape:
        _as_float_matrix(embeddings.detach().cpu())  # raises the error that names the shape
    matrix = embeddings.detach()
    if not bool(torch.isfinite(matrix).all()):
        raise ValueError("rankme got NaN or infinite embeddings; check the model's outputs")
    n_rows, n_cols = matrix.shape
    if max(n_rows, n_cols) < GRAM_MIN_ASPECT_RATIO * min(n_rows, n_cols):
        return torch.linalg.svdvals(matrix.double()).cpu().numpy()
    tall = matrix if n_rows >= n_cols else matrix.T
    gram = torch.zeros(tall.shape[1], tall.shape[1], dtype=torch.float64, device=tall.device)
    for start in range(0, tall.shape[0], GRAM_CHUNK_ROWS):
        chunk = tall[start : start + GRAM_CHUNK_ROWS].double()
        gram += chunk.T @ chunk
    eigenvalues = torch.linalg.eigvalsh(gram).clamp_min(0.0)  # round-off can leave tiny negatives
    return eigenvalues.sqrt().flip(0).cpu().numpy()


def singular_values(embeddings: np.ndarray | torch.Tensor) -> np.ndarray:
    """The min(N, K) singular values of Z (float64, descending), via the Gram matrix when N >> K."""
    if _on_cuda(embeddings):
        return singular_values_on_device(embeddings)
    matrix = _as_float_matrix(embeddings)
    n_rows, n_cols = matrix.shape
    if max(n_rows, n_cols) < GRAM_MIN_ASPECT_RATIO * min(n_rows, n_cols):
        return np.linalg.svd(matrix.astype(np.float64), compute_uv=False)
    tall = matrix if n_rows >= n_cols else matrix.T
    eigenvalues = np.linalg.eigvalsh(_gram_float64(tall))
    # Round-off can leave tiny negative eigenvalues where the true value is 0.
    return np.sqrt(np.clip(eigenvalues, 0.0, None))[::-1]


def rankme_from_singular_values(sigma: np.ndarray, eps: float = DEFAULT_EPS) -> float:
    """exp(entropy) of the L1-normalised singular values, eps added after normalising."""
    sigma = np.asarray(sigma, dtype=np.float64)
    total = sigma.sum()
    if total <= 0.0:
        raise ValueError("rankme is undefined for an all-zero embedding matrix")
    p = sigma / total + eps
    return float(np.exp(-np.sum(p * np.log(p))))


def rankme(embeddings: np.ndarray | torch.Tensor, eps: float = DEFAULT_EPS) -> float:
    """RankMe of an (N, K) embedding matrix, numpy or torch, exactly as in evaluation.md."""
    return rankme_from_singular_values(singular_values(embeddings), eps=eps)


def rankme_with_shape(embeddings: np.ndarray | torch.Tensor, eps: float = DEFAULT_EPS) -> RankMeValue:
    """RankMe plus the N and K it was computed on: record all three together."""
    if _on_cuda(embeddings):
        value = rankme(embeddings, eps=eps)  # checks the shape first
        return RankMeValue(value=value, n_samples=embeddings.shape[0], n_features=embeddings.shape[1])
    matrix = _as_float_matrix(embeddings)
    return RankMeValue(value=rankme(matrix, eps=eps), n_samples=matrix.shape[0], n_features=matrix.shape[1])


def sample_fixed_n(
    embeddings: np.ndarray | torch.Tensor, *, n_samples: int = DEFAULT_RANKME_N, seed: int = 0
) -> np.ndarray:
    """A seeded sample of exactly `n_samples` rows without replacement (same seed, same rows).

    Fixing N matters because RankMe grows with N; when fewer rows exist, say so instead of
    silently computing a value that cannot be compared with the others.
    """
    matrix = _as_float_matrix(embeddings)
    n_available = matrix.shape[0]
    if n_samples <= 0:
        raise ValueError(f"n_samples must be positive, got {n_samples}")
    if n_available < n_samples:
        raise ValueError(
            f"RankMe needs {n_samples} embeddings but only {n_available} are available; "
            "use more audio or pass a smaller rankme_n (and use that N for every compared value)"
        )
    rows = np.random.default_rng(seed).choice(n_available, size=n_samples, replace=False)
    return matrix[np.sort(rows)]
