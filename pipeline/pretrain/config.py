"""`PretrainConfig`: every knob of one pretraining run, in sections, with units in the names and its flag.

The sections (`pipeline.pretrain.config_sections`) group the settings as torchtitan's job config
does: `config.optim.base_lr`, `config.training.steps`, `config.checkpoint.storage_path`. Each field
is declared once, with its `python -m pipeline.pretrain` flag, default and help (`pipeline.cli.flags`),
and each section checks its own ranges; what needs two sections is checked here. The CLI builds the
config at the edge. `resolved()` fills the defaults that depend on the model, the machine or the
clock once, on the driver, as a `ResolvedPretrainConfig`.

The flat view: the sections' field names are unique, so side by side they are one flat mapping,
the names users and stored runs know (the flags' fields, `[pretrain]` TOML keys, MLflow params, the
checkpoints' `pretrain_config`). `to_dict()` gives it, `from_flat(**settings)` builds a config
from it and `replace(**settings)` changes some of it; Ray hands a worker `to_dict()` and the worker
rebuilds the type with `ResolvedPretrainConfig.from_flat(**config_dict)`.
"""

from __future__ import annotations

import dataclasses
import datetime
import math
from pathlib import Path
from typing import Any, Self

from pipeline.cli.flags import flat_fields, grouped, section_class
from pipeline.pretrain.config_sections import (
    CHECKPOINT_UPLOADS,
    LR_SCHEDULES,
    OPTIMIZERS,
    PLACEMENT_STRATEGIES,
    PRECISIONS,
    RUN_LEVEL_MODEL_FIELDS,
    CheckpointSettings,
    ComputeSettings,
    DataSettings,
    ModelChoice,
    OptimizerSettings,
    RankMeSettings,
    ScheduleSettings,
    TrackingSettings,
    TrainingSettings,
    ValidationSettings,
)
from pipeline.pretrain.model_facts import ModelFacts, describe_model
from pipeline.pretrain.resources import default_worker_cpus
from pipeline.shards.location import is_uri
from pipeline.storage import paths
from pipeline.tracking.setup import resolve_tracking_uri

__all__ = [
    "CHECKPOINT_UPLOADS", "LR_SCHEDULES", "OPTIMIZERS", "PLACEMENT_STRATEGIES", "PRECISIONS", "RESOLVED_FIELDS",
    "RUN_LEVEL_MODEL_FIELDS", "PretrainConfig", "ResolvedPretrainConfig",
]  # fmt: skip


@dataclasses.dataclass(frozen=True, kw_only=True)
class PretrainConfig:
    model: ModelChoice = grouped(ModelChoice, "what to train")
    data: DataSettings = grouped(DataSettings, "data")
    training: TrainingSettings = grouped(TrainingSettings, "how long and how big")
    optim: OptimizerSettings = grouped(OptimizerSettings, "optimizer")
    schedule: ScheduleSettings = grouped(ScheduleSettings, "learning-rate schedule")
    compute: ComputeSettings = grouped(ComputeSettings, "where it runs")
    tracking: TrackingSettings = grouped(TrackingSettings, "MLflow tracking")
    checkpoint: CheckpointSettings = grouped(CheckpointSettings, "checkpoints and resume")
    rankme: RankMeSettings = grouped(RankMeSettings, "RankMe during training")
    validation: ValidationSettings = grouped(ValidationSettings, "validation and convergence")

    def __post_init__(self) -> None:
        per_step = self.compute.num_workers * self.effective_micro_batch_size
        if self.training.global_batch_size % per_step:
            raise ValueError(
                f"global_batch_size {self.training.global_batch_size} is not a multiple of micro_batch_size "
                f"{self.effective_micro_batch_size} x {self.compute.num_workers} workers; pick --batch-size, "
                "--micro-batch-size and --num-workers that divide"
            )
        steps = self.training.steps
        if any(not 0 <= step <= steps for step in self.checkpoint.checkpoint_steps):
            raise ValueError(
                f"--checkpoint-steps must lie in 0..--steps ({steps}); got {self.checkpoint.checkpoint_steps}"
            )

    @classmethod
    def from_flat(cls, **settings: Any) -> Self:
        """A config from flat names (`steps=300, base_lr=1e-4`); a name no section holds is a TypeError."""
        sections: dict[str, dict[str, Any]] = {field.name: {} for field in dataclasses.fields(cls)}
        owner = {name: section for section, name in flat_fields(cls)}
        for name, value in settings.items():
            if name not in owner:
                raise TypeError(f"{cls.__name__} has no setting {name!r}")
            sections[owner[name]][name] = value
        return cls(**{name: section_class(cls, name)(**values) for name, values in sections.items()})

    def to_dict(self) -> dict[str, Any]:
        """The flat view: every section's fields side by side, by field name."""
        flat: dict[str, Any] = {}
        for field in dataclasses.fields(self):
            flat |= dataclasses.asdict(getattr(self, field.name))
        return flat

    def replace(self, **settings: Any) -> Self:
        """A copy with some settings changed, by flat name, checked again; the same type as this one."""
        return type(self).from_flat(**self.to_dict() | settings)

    @property
    def effective_micro_batch_size(self) -> int:
        training = self.training
        return training.micro_batch_size or max(1, training.global_batch_size // self.compute.num_workers)

    @property
    def accumulation_steps(self) -> int:
        return self.training.global_batch_size // (self.compute.num_workers * self.effective_micro_batch_size)

    @property
    def effective_warmup_steps(self) -> int:
        warmup = self.schedule.warmup_steps
        return warmup if warmup is not None else math.ceil(0.1 * self.training.steps)

    def model_build_overrides(self) -> dict[str, Any]:
        """`models.build_model` keyword arguments: the overrides plus the crop and mask ratio if set."""
        model = self.model
        run_level = {name: getattr(model, name) for name in RUN_LEVEL_MODEL_FIELDS if getattr(model, name) is not None}
        overrides = {**model.model_overrides, **run_level}
        if is_uri(overrides.get("codebook", "")):  # a codebook in a bucket: this machine's copy of it
            from pipeline.targets.stored_codebook import local_codebook  # only HuBERT runs need the target stage

            overrides["codebook"] = str(local_codebook(overrides["codebook"]))
        return overrides

    def describe_model(self) -> ModelFacts:
        """The model's spec, sizes and FLOPs from a build without weights."""
        return describe_model(self.model.model_name, self.model_build_overrides())

    def resolved(
        self,
        *,
        cluster_cpus: float | None = None,
        model: ModelFacts | None = None,
        shard_fingerprint: str | None = None,
    ) -> ResolvedPretrainConfig:
        """Fill the defaults that depend on the model, the clock, the filesystem or the cluster size.

        `model`: this config's `describe_model()` when the caller already has it (a study trial);
        `shard_fingerprint`: the shards' manifest's, when the caller has read it (the driver)."""
        model = model or self.describe_model()
        stamp = datetime.datetime.now(datetime.UTC).strftime("%Y%m%d-%H%M%S")
        compute = self.compute
        cpus = compute.cpus_per_worker or default_worker_cpus(compute.num_workers, cluster_cpus or 2.0)
        default_shards = paths.shards_dir_for(preset_name=model.spec.frontend_preset, max_hours=None)
        return ResolvedPretrainConfig.from_flat(
            **self.to_dict()
            | dict(
                shard_fingerprint=shard_fingerprint or self.data.shard_fingerprint,
                crop_frames=model.spec.crop_frames,
                mask_ratio=model.spec.mask_ratio,
                shards_dir=str(self.data.shards_dir or default_shards),
                run_name=self.tracking.run_name or f"{self.model.model_name}-{stamp}",
                storage_path=_absolute_storage_path(self.checkpoint.storage_path),
                tracking_uri=resolve_tracking_uri(self.tracking.tracking_uri),
                warmup_steps=self.effective_warmup_steps,
                micro_batch_size=self.effective_micro_batch_size,
                cpus_per_worker=cpus,
            )
        )


# What `resolved()` fills: every worker must read the driver's value, never work out its own.
RESOLVED_FIELDS = (
    "crop_frames", "mask_ratio", "shards_dir", "run_name", "storage_path", "tracking_uri", "warmup_steps",
    "micro_batch_size", "cpus_per_worker",
)  # fmt: skip


@dataclasses.dataclass(frozen=True, kw_only=True)
class ResolvedPretrainConfig(PretrainConfig):
    """A run's settings resolved once, on the driver (`PretrainConfig.resolved()`): the model's crop
    length and mask ratio, the shards (and their fingerprint once read), the run name, absolute
    storage and tracking locations, the warmup, the micro-batch and the CPUs per worker. The driver
    hands it to Ray as a flat dict and each worker rebuilds it
    (`ResolvedPretrainConfig.from_flat(**config_dict)`), which refuses a dict with any of those left
    to be worked out."""

    def __post_init__(self) -> None:
        super().__post_init__()
        flat = self.to_dict()
        unresolved = [name for name in RESOLVED_FIELDS if flat[name] is None]
        if unresolved:
            raise ValueError(f"a resolved run needs {', '.join(unresolved)}; build it with PretrainConfig.resolved()")
        storage_path = self.checkpoint.storage_path
        if "://" not in storage_path and not Path(storage_path).is_absolute():
            raise ValueError(f"storage_path {storage_path!r} is relative; resolved() makes it absolute")


def _absolute_storage_path(storage_path: str | None) -> str:
    """Ray resolves relative storage paths per process; make local ones absolute once."""
    if storage_path is None:
        return str(paths.default_ray_storage_dir())
    if "://" in storage_path:
        return storage_path  # s3://, gs://, ... pass through
    return str(Path(storage_path).expanduser().resolve())
