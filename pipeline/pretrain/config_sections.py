"""The sections of a pretraining config: model, data, training, optimizer, schedule, compute,
tracking, checkpoints, RankMe and validation, as torchtitan's job config groups its settings.

Each section is a frozen dataclass whose fields carry their `python -m pipeline.pretrain` flag
(`pipeline.cli.flags`) and which checks its own ranges when built, so each value is validated in
one place. Field names stay unique across sections: side by side they are the flat names that the
flags, the `[pretrain]` TOML keys, the MLflow params and the checkpoints' metadata use, unchanged.
No section is named like a field, so a flat read left over (`config.steps`) fails loudly.
Checks that need two sections (the batch split, checkpoint steps within the run) live on
`PretrainConfig`.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from models.layers.masking import check_mask_ratio
from pipeline.cli.flags import (
    field_flag,
    filled_by_program,
    flag,
    parse_betas,
    parse_names,
    parse_override,
    parse_steps,
)
from pipeline.pretrain.optim import LR_SCHEDULE_KINDS
from pipeline.rankme.pool import MIN_POOL_CROPS

# Model config fields that are knobs of the run: given as `--override`, they move to their own field.
RUN_LEVEL_MODEL_FIELDS = ("mask_ratio", "crop_frames")
PLACEMENT_STRATEGIES = ("PACK", "SPREAD", "STRICT_PACK", "STRICT_SPREAD")
OPTIMIZERS = ("adamw", "adamw8bit")
LR_SCHEDULES = LR_SCHEDULE_KINDS  # pipeline.pretrain.optim.lr_factor
CHECKPOINT_UPLOADS = ("sync", "async")  # ray.train.CheckpointUploadMode (pipeline.pretrain.checkpoint_report)
PRECISIONS = ("fp32", "bf16")  # of the forward pass (pipeline.pretrain.step.autocast_for)


def _placement_from_spread(spread: bool) -> str:
    return "SPREAD" if spread else "PACK"


def check_at_least(section: Any, lowest: dict[str, int | float]) -> None:
    """Each named field of the section at least its lowest value; the message names the flag."""
    for name, floor in lowest.items():
        value = getattr(section, name)
        if value is not None and value < floor:
            raise ValueError(f"{field_flag(type(section), name).name} must be at least {floor}, got {value}")


@dataclasses.dataclass(frozen=True, kw_only=True)
class ModelChoice:
    """What to train: the model, its overrides, and the two model knobs that are the run's."""

    model_name: str = flag("--model", "audiomae++-debug", "model name; `python -m models --list` shows them")
    model_overrides: dict[str, Any] = flag(
        "--override", None,
        'model config field, value parsed as JSON when it can be (repeatable), e.g. decoder="cross"',
        default_factory=dict, action="append", parse_text=parse_override, to_field=dict, metavar="KEY=VALUE",
    )  # fmt: skip
    # None: the model's own (0.8 AudioMAE++, 0.75 MAE); `PretrainConfig.resolved()` fills it in.
    mask_ratio: float | None = flag(
        "--mask-ratio", None, "fraction of patches removed, in (0, 1) (default: the model's)"
    )
    # None: the model's own (2 s AudioMAE++, 10 s MAE); `PretrainConfig.resolved()` fills it in.
    crop_frames: int | None = flag(
        "--crop-frames",
        None,
        "training crop in 10 ms mel frames, a multiple of the model's patch (default: the model's)",
    )

    def __post_init__(self) -> None:
        self._move_run_level_overrides()
        if self.crop_frames is not None and self.crop_frames < 1:
            raise ValueError(
                f"{field_flag(ModelChoice, 'crop_frames').name} must be a positive number of frames, got {self.crop_frames}"
            )
        if self.mask_ratio is not None:
            check_mask_ratio(self.mask_ratio, where=field_flag(ModelChoice, "mask_ratio").name)

    def _move_run_level_overrides(self) -> None:
        """`--override mask_ratio=...` becomes the mask_ratio field: each value has one home."""
        overrides = dict(self.model_overrides)
        for name in RUN_LEVEL_MODEL_FIELDS:
            if name not in overrides:
                continue
            value = overrides.pop(name)
            flag_name = field_flag(ModelChoice, name).name
            if getattr(self, name) not in (None, value):
                raise ValueError(
                    f"{flag_name} {getattr(self, name)} and --override {name}={value} disagree; give only {flag_name}"
                )
            object.__setattr__(self, name, value)  # frozen: still being constructed
        object.__setattr__(self, "model_overrides", overrides)


@dataclasses.dataclass(frozen=True, kw_only=True)
class DataSettings:
    """What the run reads: its shards, the RankMe pool's shards, and the per-worker shuffle."""

    shards_dir: str | None = flag(
        "--shards",
        None,
        "shard directory or URI from python -m pipeline.prep (default: {shards_root}/<model's front-end preset>)",
    )
    rankme_shards_dir: str | None = flag(
        "--rankme-shards", None, "shards the RankMe pool is drawn from (default: the training shards, as the paper)"
    )
    shuffle_buffer_crops: int = flag(
        "--shuffle-buffer-crops", 256, "rows each worker reads and shuffles together (0: no shuffle)"
    )
    shard_fingerprint: str | None = filled_by_program()  # the shards' manifest's, filled by the driver

    def __post_init__(self) -> None:
        check_at_least(self, {"shuffle_buffer_crops": 0})


@dataclasses.dataclass(frozen=True, kw_only=True)
class TrainingSettings:
    """How long and how big: global batch = micro batch x workers x accumulation steps."""

    steps: int = flag("--steps", 300, "optimizer steps in total (a resumed run continues up to this)")
    global_batch_size: int = flag("--batch-size", 32, "global batch size (crops per optimizer step)")
    micro_batch_size: int | None = flag(
        "--micro-batch-size", None, "crops per worker per forward pass; smaller than batch/workers means gradient "
        "accumulation (default: batch/workers, no accumulation)",
    )  # fmt: skip
    seed: int = flag("--seed", 0, "seed of the initial weights, the masking and the crop order")

    def __post_init__(self) -> None:
        check_at_least(self, {"steps": 1, "global_batch_size": 1})


@dataclasses.dataclass(frozen=True, kw_only=True)
class OptimizerSettings:
    """The optimizer (pipeline.pretrain.optim): peak lr = base_lr x global_batch / 256 x model.lr_scale."""

    optimizer: str = flag(
        "--optimizer", "adamw", "adamw, or adamw8bit (bitsandbytes, GPU; AdamW with a logged note where unavailable)"
    )
    base_lr: float = flag("--lr", 1.5e-4, "base lr; peak lr = lr x batch / 256 x model lr_scale")
    # The RankMe study's recipe (sweeps.protocol.recipe, App. B): its lr is a peak, not a base to rescale.
    peak_lr: float | None = flag(
        "--peak-lr",
        None,
        "peak lr used as given, without batch/256 scaling (replaces --lr); 0 keeps every weight as initialised",
    )
    weight_decay: float = flag("--weight-decay", 0.05, "AdamW weight decay")
    grad_clip_norm: float = flag("--grad-clip-norm", 1.0, "gradients are clipped to this total norm (0: not clipped)")
    adam_betas: tuple[float, float] = flag(
        "--adam-betas", (0.9, 0.95), "AdamW's decay rates (MAE's 0.9,0.95; Dasheng's and torch's 0.9,0.999)",
        parse_text=parse_betas, to_field=tuple,
    )  # fmt: skip
    adam_eps: float = flag("--adam-eps", 1e-8, "AdamW's epsilon")
    decay_all_parameters: bool = flag(
        "--decay-all-parameters", False, "weight decay on every parameter, as Dasheng's training does (default: "
        "biases, norms and position/cls/mask tokens are left undecayed, as MAE does)",
    )  # fmt: skip

    def __post_init__(self) -> None:
        if self.base_lr <= 0 or self.weight_decay < 0 or self.grad_clip_norm < 0 or self.adam_eps <= 0:
            raise ValueError(
                f"need --lr > 0, --weight-decay >= 0, --grad-clip-norm >= 0 (0: off), --adam-eps > 0; got "
                f"{self.base_lr}, {self.weight_decay}, {self.grad_clip_norm}, {self.adam_eps}"
            )
        # --peak-lr 0 is allowed on purpose: every weight stays as initialised (AdamW's decoupled decay
        # is scaled by the lr too) and only running statistics move, a control for the readout.
        if self.optimizer not in OPTIMIZERS or (self.peak_lr is not None and self.peak_lr < 0):
            raise ValueError(
                f"--optimizer must be one of {OPTIMIZERS} and --peak-lr >= 0; got {self.optimizer!r}, {self.peak_lr}"
            )


@dataclasses.dataclass(frozen=True, kw_only=True)
class ScheduleSettings:
    """The learning-rate schedule: a linear warmup, then a decay to a floor."""

    lr_schedule: str = flag(
        "--lr-schedule", "cosine", "after the warmup: cosine (MAE, Dasheng) or linear (wav2vec 2.0, HuBERT) decay to "
        "--min-lr-ratio x peak, or constant", choices=list(LR_SCHEDULES),
    )  # fmt: skip
    # None: 10% of steps, as AudioMAE++'s 10 of 100 epochs.
    warmup_steps: int | None = flag("--warmup-steps", None, "linear warmup steps (default: 10%% of --steps)")
    min_lr_ratio: float = flag("--min-lr-ratio", 0.0, "cosine floor as a fraction of the peak lr")

    def __post_init__(self) -> None:
        check_at_least(self, {"warmup_steps": 0})


@dataclasses.dataclass(frozen=True, kw_only=True)
class ComputeSettings:
    """Where it runs: the Ray Train worker group, its devices and its failure budget."""

    num_workers: int = flag("--num-workers", 1, "data-parallel Ray Train workers")
    use_gpu: bool = flag("--use-gpu", False, "one GPU per worker, NCCL, bf16 autocast")
    precision: str | None = flag("--precision", None, "fp32, or bf16 autocast (default: bf16 on GPU, fp32 on CPU)")
    cpus_per_worker: float | None = flag(
        "--cpus-per-worker", None, "default: the cluster's CPUs shared out, one left to the data pipeline"
    )
    placement_strategy: str = flag(
        "--spread", "PACK", "place workers on different nodes (placement strategy SPREAD)",
        action="store_true", to_field=_placement_from_spread,
    )  # fmt: skip
    compile_model: bool = flag("--compile", False, "torch.compile the model")
    ray_address: str | None = flag(
        "--address", None, "Ray address; auto = the `ray start` cluster here (default: $RAY_ADDRESS or a new local Ray)"
    )
    max_failures: int = flag("--max-failures", 3, "worker-group restarts after a crash before giving up")
    # Ray Train 2.60 charges a node preemption to its own budget (FailureConfig.max_preemption_failures).
    max_preemption_failures: int = flag("--max-preemptions", -1, "restarts after node preemptions (-1: unlimited)")

    def __post_init__(self) -> None:
        # Ray Train's num_workers=0 "local mode" neither persists checkpoints nor retries.
        check_at_least(self, {"num_workers": 1, "max_failures": 0, "max_preemption_failures": -1})
        if self.precision not in (None, *PRECISIONS):
            raise ValueError(f"--precision must be one of {PRECISIONS}, got {self.precision!r}")
        if self.placement_strategy not in PLACEMENT_STRATEGIES:
            raise ValueError(f"placement_strategy {self.placement_strategy!r} is not one of {PLACEMENT_STRATEGIES}")


@dataclasses.dataclass(frozen=True, kw_only=True)
class TrackingSettings:
    """Where and how often it is recorded in MLflow."""

    run_name: str | None = flag("--run-name", None, "same name again resumes that run (default: <model>-<UTC time>)")
    tracking_uri: str | None = flag(
        "--tracking-uri", None, "MLflow tracking URI (default: $MLFLOW_TRACKING_URI or {tracking_uri})"
    )
    experiment_name: str = flag("--experiment", "pretrain", "MLflow experiment name")
    log_every_steps: int = flag("--log-every", 10, "steps between metric logs")
    # 10 s: MLflow's own default sampling interval (SystemMetricsMonitor).
    system_metrics_every_s: float = flag(
        "--system-metrics-every", 10.0, "seconds between CPU/memory/GPU samples logged per node (0: off)"
    )
    parent_run_id: str | None = filled_by_program()  # an MLflow study run this run belongs to (sweeps)
    mlflow_run_id: str | None = filled_by_program()  # the run's own, filled by the driver

    def __post_init__(self) -> None:
        check_at_least(self, {"log_every_steps": 1, "system_metrics_every_s": 0})


@dataclasses.dataclass(frozen=True, kw_only=True)
class CheckpointSettings:
    """Where checkpoints go, when, how many stay, and what a resume may change."""

    storage_path: str | None = flag(
        "--storage-path", None, "Ray run storage; shared (NFS, s3://, gs://) on clusters (default: {ray_storage})"
    )
    checkpoint_every_steps: int = flag("--checkpoint-every", 100, "steps between checkpoints")
    # A study evaluates R and Q at each of these (the paper's points are checkpoints); 0 is the initialisation.
    checkpoint_steps: tuple[int, ...] = flag(
        "--checkpoint-steps", (), "comma-separated steps to checkpoint at as well, all kept (0: the initialisation)",
        parse_text=parse_steps, to_field=tuple,
    )  # fmt: skip
    num_checkpoints_to_keep: int = flag("--keep-checkpoints", 2, "checkpoints kept in storage, the latest ones")
    # async: Ray copies the checkpoint to storage in a thread while training goes on; the step with a checkpoint
    # stalled 4.2 s instead of 6.6 s (1.3 GB, local disk; docs/performance.md), and on a bucket the copy dominates.
    checkpoint_upload: str = flag("--checkpoint-upload", "async", "sync or async copy of checkpoints to storage")
    # A bucket that stops answering is waited for this long, then the run resumes from its last whole
    # checkpoint (pipeline.pretrain.store_outage); 10 minutes covers a store's restart or a network blip.
    store_wait_s: float = flag("--store-wait-s", 600.0, "seconds to wait for a storage bucket that stopped answering")
    allow_changed: tuple[str, ...] = flag(
        "--allow-changed", (), "on resume, settings allowed to differ from the checkpoint's, comma-separated flag "
        "names (e.g. lr,warmup-steps); recorded on the run", parse_text=parse_names, to_field=tuple,
    )  # fmt: skip

    def __post_init__(self) -> None:
        check_at_least(self, {"checkpoint_every_steps": 1, "num_checkpoints_to_keep": 1, "store_wait_s": 0})
        if self.checkpoint_upload not in CHECKPOINT_UPLOADS:
            raise ValueError(f"--checkpoint-upload must be one of {CHECKPOINT_UPLOADS}, got {self.checkpoint_upload!r}")


@dataclasses.dataclass(frozen=True, kw_only=True)
class RankMeSettings:
    """When RankMe is measured during training, and on how many crops."""

    rankme_every_steps: int = flag("--rankme-every", 100, "steps between RankMe measurements (0: off)")
    # None: the paper's 30,000 (Deng et al. Sec. III-C), or every crop the shards hold when fewer.
    rankme_n: int | None = flag("--rankme-n", None, "crops in the RankMe pool (default: 30000, or all the shards hold)")
    rankme_steps: tuple[int, ...] = flag(
        "--rankme-steps", (), "comma-separated steps to measure RankMe at as well (e.g. Table III's 50000,100000)",
        parse_text=parse_steps, to_field=tuple,
    )  # fmt: skip

    def __post_init__(self) -> None:
        check_at_least(self, {"rankme_every_steps": 0})
        if self.rankme_n is not None and self.rankme_n < MIN_POOL_CROPS:
            raise ValueError(
                f"--rankme-n must be at least {MIN_POOL_CROPS}, got {self.rankme_n}: the RankMe of one embedding "
                "is 1 whatever the model (a pool under 8 x the embedding width is recorded as capped)"
            )
        if any(step < 1 for step in self.rankme_steps):
            raise ValueError(f"need --rankme-steps >= 1; got {self.rankme_steps}")


@dataclasses.dataclass(frozen=True, kw_only=True)
class ValidationSettings:
    """Validation MSE on held-out shard rows (pipeline.pretrain.validation): `converged` and early stopping."""

    validation_every_steps: int = flag("--validation-every", 0, "steps between validation-MSE checks (0: off)")
    validation_patience: int = flag("--validation-patience", 5, "checks without improvement that mean converged")
    validation_tolerance: float = flag(
        "--validation-tolerance", 1e-3, "an improvement is a relative fall of the best validation MSE above this"
    )
    validation_stop: bool = flag("--validation-stop", False, "stop training once converged (the study's early stop)")
    validation_fraction: float = flag(
        "--validation-fraction", 0.01, "share of shard clips held out of training for validation (seeded by clip id)"
    )
    validation_num_clips: int = flag("--validation-clips", 512, "held-out crops the validation MSE is measured on")

    def __post_init__(self) -> None:
        check_at_least(self, {"validation_every_steps": 0, "validation_patience": 1, "validation_num_clips": 1})
        if not 0.0 <= self.validation_fraction < 1.0:
            raise ValueError(f"need --validation-fraction in [0, 1); got {self.validation_fraction}")
