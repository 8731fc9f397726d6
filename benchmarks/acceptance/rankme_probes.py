"""RankMe and the probes on the device: the value the GPU route gives against the CPU route's, their
times, and a task's clips embedded by the frozen model on the device and read out by the kNN probe
there and the linear probe (scikit-learn, so on the CPU whatever the device).
"""

from __future__ import annotations

import time

import numpy as np
import torch

import models
from benchmarks.acceptance import measure
from pipeline.evaluate.embeddings import FrameEmbedder
from pipeline.evaluate.probes.knn import run_knn_probe
from pipeline.evaluate.probes.linear import run_linear_probe
from pipeline.evaluate.probes.scene import split_arrays
from pipeline.rankme.effective_rank import rankme

# The scaling study's RankMe pool: 30,000 crops (Deng et al., pipeline.rankme.pool.PAPER_RANKME_N).
RANKME_AGREEMENT = 1e-5  # relative: the "same value to 1e-5"


def pool_like(n: int, dim: int, device: torch.device) -> torch.Tensor:
    """float32 (n, dim) with a power-law spectrum (sigma_k ~ k^-0.7), so RankMe is far from both ends."""
    generator = torch.Generator().manual_seed(0)
    return (torch.randn(n, dim, generator=generator) * torch.arange(1, dim + 1).pow(-0.7)).to(device)


def _timed(call, device: torch.device, repeats: int = 3) -> tuple[float, float]:
    """(value, median seconds) of `call()`."""
    seconds, value = [], None
    for _ in range(repeats):
        measure.synchronize(device)
        began = time.perf_counter()
        value = call()
        seconds.append(time.perf_counter() - began)
    return value, measure.median(seconds)


def compare_rankme(device: torch.device, *, n: int, dim: int) -> dict:
    pool = pool_like(n, dim, device)
    on_host = pool.cpu().numpy()
    device_value, device_s = _timed(lambda: rankme(pool), device)
    host_value, host_s = _timed(lambda: rankme(on_host), torch.device("cpu"))
    gap = abs(device_value - host_value) / host_value
    return {"n": n, "dim": dim, "device_value": device_value, "cpu_value": host_value, "relative_gap": gap,
            "device_s": device_s, "cpu_s": host_s, "agrees": gap <= RANKME_AGREEMENT}  # fmt: skip


def _splits(features: np.ndarray, labels: np.ndarray) -> dict:
    """Every fifth clip to validation and the next to test (the clips interleave the kinds)."""
    fold = np.arange(len(labels)) % 5
    pick = {"train": fold < 3, "valid": fold == 3, "test": fold == 4}
    return {name: split_arrays(features[mask], labels[mask]) for name, mask in pick.items()}


def embed_and_probe(model_name: str, waves: list[np.ndarray], labels: list[int], device: torch.device) -> dict:
    """Scene embeddings of `waves` (FrameEmbedder on `device`), then the kNN and linear probes' test accuracy."""
    torch.manual_seed(0)
    embedder = FrameEmbedder(models.build_model(model_name), device=device)
    features, embed_s = _timed(lambda: embedder.scene_embeddings(waves), device, repeats=1)
    splits = _splits(features, np.asarray(labels, dtype=np.int64))
    n_classes = int(max(labels)) + 1
    common = {**splits, "n_classes": n_classes, "metric": "top1_acc"}
    knn, knn_s = _timed(lambda: run_knn_probe(**common, device=device), device, repeats=1)
    linear, linear_s = _timed(lambda: run_linear_probe(**common, multilabel=False), device, repeats=1)
    return {"model": model_name, "clips": len(waves), "embed_s": embed_s, "clips_per_s": len(waves) / embed_s,
            "knn_test_accuracy": knn.test_score, "knn_s": knn_s, "linear_test_accuracy": linear.test_score,
            "linear_s": linear_s, "chance": 1.0 / n_classes}  # fmt: skip
