"""`PretrainConfig`: every knob of one pretraining run, with units in the names.

The CLI builds it at the edge; Ray hands it to each worker as a plain dict (`to_dict`), turned back
into the dataclass in one line (`PretrainConfig(**config_dict)`). `resolved()` fills the defaults
that depend on the machine or the clock once, on the driver, so every worker sees the same values.
"""

from __future__ import annotations

import dataclasses
import datetime
import math
from pathlib import Path
from typing import Any

from pipeline import paths


@dataclasses.dataclass(frozen=True, kw_only=True)
class PretrainConfig:
    # What to train, on what.
    model_name: str = "audiomae++-debug"
    model_overrides: dict[str, Any] = dataclasses.field(default_factory=dict)
    mask_ratio: float | None = None  # None: the model's own (0.8 AudioMAE++, 0.75 MAE)
    shards_dir: str | None = None  # None: the default corpus's shards for the model's front end
    # Held-out shards for RankMe over training; None: a fixed sample of training crops.
    rankme_shards_dir: str | None = None

    # How long and how big. global = micro x workers x accumulation steps.
    steps: int = 300
    global_batch_size: int = 32
    micro_batch_size: int | None = None  # per worker per forward pass; None: no accumulation

    # Optimisation (pipeline.pretrain.optim): peak lr = base_lr x global_batch / 256 x model.lr_scale.
    base_lr: float = 1.5e-4
    weight_decay: float = 0.05
    warmup_steps: int | None = None  # None: 10% of steps, as AudioMAE++'s 10 of 100 epochs
    min_lr_ratio: float = 0.0
    grad_clip_norm: float = 1.0
    seed: int = 0

    # Where it runs.
    num_workers: int = 1  # data-parallel Ray Train workers
    use_gpu: bool = False
    cpus_per_worker: float | None = None  # None: share the CPUs of the cluster (at least 1)
    placement_strategy: str = "PACK"  # "SPREAD" puts workers on different nodes
    compile_model: bool = False
    ray_address: str | None = None  # None: RAY_ADDRESS, a running Ray, or a new local one

    # Where it is recorded.
    run_name: str | None = None  # same name again = resume; None: "<model>-<UTC time>"
    storage_path: str | None = None  # Ray run storage (shared FS, s3:// or gs:// on clusters)
    tracking_uri: str | None = None  # MLflow; None: $MLFLOW_TRACKING_URI or the local SQLite file
    experiment_name: str = "pretrain"
    parent_run_id: str | None = None  # an MLflow study run this run belongs to (sweeps)
    # Filled by the driver, not by users: the run's MLflow id and the shards' fingerprint.
    mlflow_run_id: str | None = None
    shard_fingerprint: str | None = None

    # How often.
    log_every_steps: int = 10
    checkpoint_every_steps: int = 100
    rankme_every_steps: int = 100  # 0 disables RankMe
    rankme_num_clips: int = 256
    num_checkpoints_to_keep: int = 2
    max_failures: int = 3
    shuffle_buffer_crops: int = 256  # per-worker local shuffle of the streamed crops

    def __post_init__(self) -> None:
        positive = {
            "steps": self.steps,
            "global_batch_size": self.global_batch_size,
            "log_every_steps": self.log_every_steps,
            "checkpoint_every_steps": self.checkpoint_every_steps,
            "rankme_num_clips": self.rankme_num_clips,
            "num_checkpoints_to_keep": self.num_checkpoints_to_keep,
        }
        for name, value in positive.items():
            if value <= 0:
                raise ValueError(f"{name} must be positive, got {value}")
        if self.num_workers < 1:
            # Ray Train's num_workers=0 "local mode" neither persists checkpoints nor retries.
            raise ValueError(f"num_workers must be at least 1, got {self.num_workers}")
        if self.max_failures < 0 or self.rankme_every_steps < 0:
            raise ValueError("max_failures and rankme_every_steps must be >= 0")
        if self.base_lr <= 0 or self.weight_decay < 0 or self.grad_clip_norm <= 0:
            raise ValueError(
                f"need base_lr > 0, weight_decay >= 0, grad_clip_norm > 0; got {self.base_lr}, "
                f"{self.weight_decay}, {self.grad_clip_norm}"
            )
        if self.mask_ratio is not None and not 0.0 < self.mask_ratio < 1.0:
            raise ValueError(f"mask_ratio must be in (0, 1), got {self.mask_ratio}")
        if self.placement_strategy not in ("PACK", "SPREAD", "STRICT_PACK", "STRICT_SPREAD"):
            raise ValueError(f"placement_strategy {self.placement_strategy!r} is not a Ray placement strategy")
        per_step = self.num_workers * self.effective_micro_batch_size
        if self.global_batch_size % per_step:
            raise ValueError(
                f"global_batch_size {self.global_batch_size} is not a multiple of micro_batch_size "
                f"{self.effective_micro_batch_size} x {self.num_workers} workers; pick sizes that divide"
            )

    @property
    def effective_micro_batch_size(self) -> int:
        return self.micro_batch_size or max(1, self.global_batch_size // self.num_workers)

    @property
    def accumulation_steps(self) -> int:
        return self.global_batch_size // (self.num_workers * self.effective_micro_batch_size)

    @property
    def effective_warmup_steps(self) -> int:
        return self.warmup_steps if self.warmup_steps is not None else math.ceil(0.1 * self.steps)

    def model_build_overrides(self) -> dict[str, Any]:
        """`models.build_model` keyword arguments: the overrides plus the mask ratio if set."""
        overrides = dict(self.model_overrides)
        if self.mask_ratio is not None:
            overrides["mask_ratio"] = self.mask_ratio
        return overrides

    def default_shards_dir(self) -> Path:
        """Where `pipeline.defaults` puts the default corpus's shards for this model's front end."""
        import torch

        import models
        from pipeline.defaults import shards_dir_for

        with torch.device("meta"):  # only the spec is needed: allocate no weights
            preset = models.build_model(self.model_name, **self.model_build_overrides()).spec.frontend_preset
        return shards_dir_for(preset_name=preset, max_hours=None)

    def resolved(self, *, cluster_cpus: float | None = None) -> PretrainConfig:
        """Fill the defaults that depend on the clock, the filesystem or the cluster size."""
        from pipeline.tracking import resolve_tracking_uri

        stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%d-%H%M%S")
        cpus = self.cpus_per_worker
        if cpus is None:
            # Leave one CPU to the data pipeline and the driver; never less than one per worker.
            spare = (cluster_cpus or 2.0) - 1.0
            cpus = float(max(1, math.floor(spare / self.num_workers)))
        return dataclasses.replace(
            self,
            shards_dir=str(self.shards_dir or self.default_shards_dir()),
            run_name=self.run_name or f"{self.model_name}-{stamp}",
            storage_path=_absolute_storage_path(self.storage_path),
            tracking_uri=resolve_tracking_uri(self.tracking_uri),
            warmup_steps=self.effective_warmup_steps,
            micro_batch_size=self.effective_micro_batch_size,
            cpus_per_worker=cpus,
        )

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def _absolute_storage_path(storage_path: str | None) -> str:
    """Ray resolves relative storage paths per process; make local ones absolute once."""
    if storage_path is None:
        return str(paths.default_ray_storage_dir())
    if "://" in storage_path:
        return storage_path  # s3://, gs://, ... pass through
    return str(Path(storage_path).expanduser().resolve())
