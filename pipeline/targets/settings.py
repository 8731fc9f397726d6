"""Every setting of a k-means target fit, with HuBERT's choices as the defaults.

The settings, the shards' fingerprint and the feature kind together name a codebook: the cache
(`pipeline.targets.codebook.ensure_codebook`) reuses one only when all of them match.
"""

from __future__ import annotations

import dataclasses

FEATURE_KINDS = ("mfcc",)  # iteration 1; "hubert" (a teacher's layer output, iteration 2) is not built yet

# HuBERT Sec. IV-C: iteration 1 clusters 39-d MFCC into 100 units; iteration 2 clusters the
# first-iteration BASE model's layer-6 output into 500 (Large / X-Large: BASE it-2 layer 9, 500).
HUBERT_CLUSTERS = {"mfcc": 100, "hubert": 500}
HUBERT_TEACHER_LAYER = 6  # 1-based transformer layer of the BASE teacher (Sec. IV-C)


@dataclasses.dataclass(frozen=True, kw_only=True)
class TargetSettings:
    features: str = "mfcc"
    clusters: int = HUBERT_CLUSTERS["mfcc"]
    # One crop per sampled segment row, cut and normalised as the training reader does
    # (pipeline.shards.crops), so the fit sees the inputs the model will be labelled on. 500 frames =
    # 10 s, the study's clip length (App. B), the paper-size HuBERT crop.
    crop_frames: int = 500
    # HuBERT fits k-means on a random 10% of the training data (Sec. IV-C; fairseq simple_kmeans
    # README `--percent 0.1`); the cap bounds memory and time on big shard sets (20k 10 s crops =
    # 56 h, ~20M MFCC frames, 3 GB of float32 features).
    sample_fraction: float = 0.1
    max_sample_crops: int = 20_000
    seed: int = 0
    # scikit-learn MiniBatchKMeans as fairseq examples/hubert/simple_kmeans/learn_kmeans.py sets it.
    init: str = "k-means++"
    max_iter: int = 100
    batch_size: int = 10_000
    tol: float = 0.0
    max_no_improvement: int = 100
    n_init: int = 20
    reassignment_ratio: float = 0.0

    def __post_init__(self) -> None:
        if self.features not in FEATURE_KINDS:
            raise ValueError(f"--features {self.features!r}: choose one of {list(FEATURE_KINDS)} (HuBERT "
                             "iteration-2 targets from a teacher's layer are not implemented yet)")
        for name in ("clusters", "crop_frames", "max_sample_crops", "max_iter", "batch_size", "n_init"):
            if not isinstance(getattr(self, name), int) or getattr(self, name) < 1:
                raise ValueError(f"--{name.replace('_', '-')} {getattr(self, name)!r}: must be a whole number >= 1")
        if self.clusters < 2:
            raise ValueError(f"--clusters {self.clusters}: k-means targets need at least 2 clusters")
        if not 0.0 < self.sample_fraction <= 1.0:
            raise ValueError(f"--sample-fraction {self.sample_fraction}: must be in (0, 1]")

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    def kmeans_parameters(self) -> dict:
        """The MiniBatchKMeans keyword arguments these settings fix (not the seed or k)."""
        return {name: getattr(self, name) for name in
                ("init", "max_iter", "batch_size", "tol", "max_no_improvement", "n_init", "reassignment_ratio")}
