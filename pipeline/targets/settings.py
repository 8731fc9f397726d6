"""Every setting of a k-means target fit, with HuBERT's choices as the defaults.

The settings, the shards' fingerprint and the feature kind together name a codebook: the cache
(`pipeline.targets.codebook.ensure_codebook`) reuses one only when all of them match.
"""

from __future__ import annotations

import dataclasses

# "mfcc": HuBERT iteration 1; "hubert": a trained HuBERT's layer output (iteration 2, needs a teacher checkpoint)
FEATURE_KINDS = ("mfcc", "hubert")

# HuBERT Sec. IV-B / IV-C: iteration 1 clusters 39-d MFCC into 100 units; iteration 2 clusters the
# first-iteration BASE model's layer-6 output into 500 (Large / X-Large: BASE it-2 layer 9, 500).
HUBERT_CLUSTERS = {"mfcc": 100, "hubert": 500}
HUBERT_TEACHER_LAYER = 6  # 1-based transformer layer of the BASE teacher (Sec. IV-B)


@dataclasses.dataclass(frozen=True, kw_only=True)
class TargetSettings:
    features: str = "mfcc"
    clusters: int = HUBERT_CLUSTERS["mfcc"]
    # One crop per sampled segment row, cut and normalised as the training reader does
    # (pipeline.shards.crops), so the fit sees the inputs the model will be labelled on. 500 frames =
    # 10 s, the study's clip length (App. B), the paper-size HuBERT crop.
    crop_frames: int = 500
    # k-means on a random 10% of the training data: fairseq examples/hubert/simple_kmeans README
    # (`--percent 0.1`); the cap bounds memory and time on big shard sets (20k 10 s crops =
    # 56 h, ~20M MFCC frames, 3 GB of float32 features).
    sample_fraction: float = 0.1
    max_sample_crops: int = 20_000
    seed: int = 0
    # iteration 2 only: the teacher's checkpoint folder and the 1-based block whose output is clustered
    teacher_checkpoint: str | None = None
    teacher_layer: int | None = None
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
            raise ValueError(f"--features {self.features!r}: choose one of {list(FEATURE_KINDS)}")
        teacher_given = (self.teacher_checkpoint is not None, self.teacher_layer is not None)
        if teacher_given != (self.features == "hubert",) * 2:
            raise ValueError(
                "--features hubert needs --teacher CHECKPOINT_DIR and --teacher-layer L (HuBERT BASE: 6); "
                "--features mfcc takes neither"
            )
        for name in ("clusters", "crop_frames", "max_sample_crops", "max_iter", "batch_size", "n_init"):
            if not isinstance(getattr(self, name), int) or getattr(self, name) < 1:
                raise ValueError(f"--{name.replace('_', '-')} {getattr(self, name)!r}: must be a whole number >= 1")
        if self.clusters < 2:
            raise ValueError(f"--clusters {self.clusters}: k-means targets need at least 2 clusters")
        if not 0.0 < self.sample_fraction <= 1.0:
            raise ValueError(f"--sample-fraction {self.sample_fraction}: must be in (0, 1]")

    @staticmethod
    def for_features(features: str, **settings) -> TargetSettings:
        """HuBERT's k (mfcc 100, hubert 500) and a sample that fits in memory (hubert features are
        768+ wide: 2,000 10 s crops = 1M frames, 3 GB) unless `settings` give them."""
        settings = {key: value for key, value in settings.items() if value is not None}
        settings.setdefault("clusters", HUBERT_CLUSTERS.get(features, 2))
        if features == "hubert":
            settings.setdefault("max_sample_crops", 2_000)
            settings.setdefault("teacher_layer", HUBERT_TEACHER_LAYER)
        return TargetSettings(features=features, **settings)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    def kmeans_parameters(self) -> dict:
        """The MiniBatchKMeans keyword arguments these settings fix (not the seed or k)."""
        return {
            name: getattr(self, name)
            for name in ("init", "max_iter", "batch_size", "tol", "max_no_improvement", "n_init", "reassignment_ratio")
        }
