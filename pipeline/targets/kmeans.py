"""Fit the codebook: scikit-learn's MiniBatchKMeans with HuBERT's settings (fairseq simple_kmeans)."""

from __future__ import annotations

import dataclasses

import numpy as np

from pipeline.targets.settings import TargetSettings


class TooFewFramesError(ValueError):
    """Fewer feature frames than clusters: k-means cannot place every centroid on data."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class KMeansFit:
    centroids: np.ndarray  # float32 (clusters, feature_dim)
    inertia: float  # mean squared distance of a frame to its centroid (fairseq: -score / frames)
    iterations: int  # MiniBatchKMeans.n_iter_: passes over the data
    steps: int  # MiniBatchKMeans.n_steps_: mini-batches seen


def fit_kmeans(features: np.ndarray, settings: TargetSettings) -> KMeansFit:
    """Cluster `features` (frames, dim) into `settings.clusters` centroids."""
    from sklearn.cluster import (
        MiniBatchKMeans,  # a second to import; only this stage needs it
    )

    if len(features) < settings.clusters:
        raise TooFewFramesError(
            f"{len(features)} feature frames cannot fit {settings.clusters} clusters: pass fewer --clusters, a "
            "larger --sample-fraction / --max-sample-crops, or prepare more audio"
        )
    model = MiniBatchKMeans(
        n_clusters=settings.clusters,
        random_state=settings.seed,
        compute_labels=False,
        init_size=None,
        **settings.kmeans_parameters(),
    )
    model.fit(features)
    inertia = -model.score(features) / len(features)
    return KMeansFit(
        centroids=model.cluster_centers_.astype(np.float32),
        inertia=float(inertia),
        iterations=int(model.n_iter_),
        steps=int(model.n_steps_),
    )
