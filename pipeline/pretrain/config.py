"""`PretrainConfig`: every knob of one pretraining run, with units in the names and its flag.

Each field is declared once, with its `python -m pipeline.pretrain` flag, default and help
(`pipeline.cli.flags`). The CLI builds the config at the edge. `resolved()` fills the defaults that
depend on the model, the machine or the clock once, on the driver, as a `ResolvedPretrainConfig`;
Ray hands that to each worker as a plain dict (`to_dict`), turned back into the type in one line,
so every worker reads the same crop length, mask ratio, paths and sizes.
"""

from __future__ import annotations

import dataclasses
import datetime
import math
from pathlib import Path
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
from pipeline.pretrain.model_facts import ModelFacts, describe_model
from pipeline.pretrain.optim import LR_SCHEDULE_KINDS
from pipeline.pretrain.resources import default_worker_cpus
from pipeline.rankme.pool import MIN_POOL_CROPS
from pipeline.shards.location import is_uri
from pipeline.storage import paths
from pipeline.tracking.setup import resolve_tracking_uri

# Model config fields that are knobs of the run: given as `--override`, they move to their own field.
RUN_LEVEL_MODEL_FIELDS = ("mask_ratio", "crop_frames")
PLACEMENT_STRATEGIES = ("PACK", "SPREAD", "STRICT_PACK", "STRICT_SPREAD")
OPTIMIZERS = ("adamw", "adamw8bit")
LR_SCHEDULES = LR_SCHEDULE_KINDS  # pipeline.pretrain.optim.lr_factor
CHECKPOINT_UPLOADS = ("sync", "async")  # ray.train.CheckpointUploadMode (pipeline.pretrain.checkpoint_report)
PRECISIONS = ("fp32", "bf16")  # of the forward pass (pipeline.pretrain.step.autocast_for)


def _placement_from_spread(spread: bool) -> str:
    return "SPREAD" if spread else "PACK"


@dataclasses.dataclass(frozen=True, kw_only=True)
class PretrainConfig:
    # What to train, on what.
    model_name: str = flag("--model", "audiomae++-debug", "model name; `python -m models --list` shows them")
    model_overrides: dict[str, Any] = flag(
        "--override", None,
        'model config field, value parsed as JSON when it can be (repeatable), e.g. decoder="cross"',
        default_factory=dict, action="append", parse_text=parse_override, to_field=dict, metavar="KEY=VALUE",
    )  # fmt: skip
    # None: the model's own (0.8 AudioMAE++, 0.75 MAE); `resolved()` fills it in.
    mask_ratio: float | None = flag(
        "--mask-ratio", None, "fraction of patches removed, in (0, 1) (default: the model's)"
    )
    # None: the model's own (2 s AudioMAE++, 10 s MAE); `resolved()` fills it in.
    crop_frames: int | None = flag(
        "--crop-frames",
        None,
        "training crop in 10 ms mel frames, a multiple of the model's patch (default: the model's)",
    )
    shards_dir: str | None = flag(
        "--shards",
        None,
        "shard directory or URI from python -m pipeline.prep (default: {shards_root}/<model's front-end preset>)",
    )
    rankme_shards_dir: str | None = flag(
        "--rankme-shards", None, "shards the RankMe pool is drawn from (default: the training shards, as the paper)"
    )

    # How long and how big. global = micro x workers x accumulation steps.
    steps: int = flag("--steps", 300, "optimizer steps in total (a resumed run continues up to this)")
    global_batch_size: int = flag("--batch-size", 32, "global batch size (crops per optimizer step)")
    micro_batch_size: int | None = flag(
        "--micro-batch-size", None, "crops per worker per forward pass; smaller than batch/workers means gradient "
        "accumulation (default: batch/workers, no accumulation)",
    )  # fmt: skip

    # Optimisation (pipeline.pretrain.optim): peak lr = base_lr x global_batch / 256 x model.lr_scale.
    base_lr: float = flag("--lr", 1.5e-4, "base lr; peak lr = lr x batch / 256 x model lr_scale")
    weight_decay: float = flag("--weight-decay", 0.05, "AdamW weight decay")
    # None: 10% of steps, as AudioMAE++'s 10 of 100 epochs.
    warmup_steps: int | None = flag("--warmup-steps", None, "linear warmup steps (default: 10%% of --steps)")
    min_lr_ratio: float = flag("--min-lr-ratio", 0.0, "cosine floor as a fraction of the peak lr")
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
    lr_schedule: str = flag(
        "--lr-schedule", "cosine", "after the warmup: cosine (MAE, Dasheng) or linear (wav2vec 2.0, HuBERT) decay to "
        "--min-lr-ratio x peak, or constant", choices=list(LR_SCHEDULES),
    )  # fmt: skip
    # The RankMe study's recipe (sweeps.protocol.recipe, App. B): its lr is a peak, not a base to rescale.
    peak_lr: float | None = flag(
        "--peak-lr",
        None,
        "peak lr used as given, without batch/256 scaling (replaces --lr); 0 keeps every weight as initialised",
    )
    optimizer: str = flag(
        "--optimizer", "adamw", "adamw, or adamw8bit (bitsandbytes, GPU; AdamW with a logged note where unavailable)"
    )
    seed: int = flag("--seed", 0, "seed of the initial weights, the masking and the crop order")

    allow_changed: tuple[str, ...] = flag(
        "--allow-changed", (), "on resume, settings allowed to differ from the checkpoint's, comma-separated flag "
        "names (e.g. lr,warmup-steps); recorded on the run", parse_text=parse_names, to_field=tuple,
    )  # fmt: skip

    # Where it runs.
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

    # Where it is recorded.
    run_name: str | None = flag("--run-name", None, "same name again resumes that run (default: <model>-<UTC time>)")
    storage_path: str | None = flag(
        "--storage-path", None, "Ray run storage; shared (NFS, s3://, gs://) on clusters (default: {ray_storage})"
    )
    tracking_uri: str | None = flag(
        "--tracking-uri", None, "MLflow tracking URI (default: $MLFLOW_TRACKING_URI or {tracking_uri})"
    )
    experiment_name: str = flag("--experiment", "pretrain", "MLflow experiment name")
    parent_run_id: str | None = filled_by_program()  # an MLflow study run this run belongs to (sweeps)
    # Filled by the driver: the run's MLflow id and the shards' fingerprint.
    mlflow_run_id: str | None = filled_by_program()
    shard_fingerprint: str | None = filled_by_program()

    # How often.
    log_every_steps: int = flag("--log-every", 10, "steps between metric logs")
    checkpoint_every_steps: int = flag("--checkpoint-every", 100, "steps between checkpoints")
    rankme_every_steps: int = flag("--rankme-every", 100, "steps between RankMe measurements (0: off)")
    # None: the paper's 30,000 (Deng et al. Sec. III-C), or every crop the shards hold when fewer.
    rankme_n: int | None = flag("--rankme-n", None, "crops in the RankMe pool (default: 30000, or all the shards hold)")
    rankme_steps: tuple[int, ...] = flag(
        "--rankme-steps", (), "comma-separated steps to measure RankMe at as well (e.g. Table III's 50000,100000)",
        parse_text=parse_steps, to_field=tuple,
    )  # fmt: skip
    # Validation MSE on held-out shard rows (pipeline.pretrain.validation): `converged` and early stopping.
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
    num_checkpoints_to_keep: int = flag("--keep-checkpoints", 2, "checkpoints kept in storage, the latest ones")
    # A study evaluates R and Q at each of these (the paper's points are checkpoints); 0 is the initialisation.
    checkpoint_steps: tuple[int, ...] = flag(
        "--checkpoint-steps", (), "comma-separated steps to checkpoint at as well, all kept (0: the initialisation)",
        parse_text=parse_steps, to_field=tuple,
    )  # fmt: skip
    # 10 s: MLflow's own default sampling interval (SystemMetricsMonitor).
    system_metrics_every_s: float = flag(
        "--system-metrics-every", 10.0, "seconds between CPU/memory/GPU samples logged per node (0: off)"
    )
    max_failures: int = flag("--max-failures", 3, "worker-group restarts after a crash before giving up")
    # Ray Train 2.60 charges a node preemption to its own budget (FailureConfig.max_preemption_failures).
    max_preemption_failures: int = flag("--max-preemptions", -1, "restarts after node preemptions (-1: unlimited)")
    # async: Ray copies the checkpoint to storage in a thread while training goes on; the step with a checkpoint
    # stalled 4.2 s instead of 6.6 s (1.3 GB, local disk; docs/performance.md), and on a bucket the copy dominates.
    checkpoint_upload: str = flag("--checkpoint-upload", "async", "sync or async copy of checkpoints to storage")
    shuffle_buffer_crops: int = flag(
        "--shuffle-buffer-crops", 256, "rows each worker reads and shuffles together (0: no shuffle)"
    )

    def __post_init__(self) -> None:
        self._move_run_level_overrides()
        self._check_ranges()
        per_step = self.num_workers * self.effective_micro_batch_size
        if self.global_batch_size % per_step:
            raise ValueError(
                f"global_batch_size {self.global_batch_size} is not a multiple of micro_batch_size "
                f"{self.effective_micro_batch_size} x {self.num_workers} workers; pick --batch-size, "
                "--micro-batch-size and --num-workers that divide"
            )

    def _move_run_level_overrides(self) -> None:
        """`--override mask_ratio=...` becomes the mask_ratio field: each value has one home."""
        overrides = dict(self.model_overrides)
        for name in RUN_LEVEL_MODEL_FIELDS:
            if name not in overrides:
                continue
            value = overrides.pop(name)
            if getattr(self, name) not in (None, value):
                raise ValueError(
                    f"{_flag(name)} {getattr(self, name)} and --override {name}={value} disagree; "
                    f"give only {_flag(name)}"
                )
            object.__setattr__(self, name, value)  # frozen: still being constructed
        object.__setattr__(self, "model_overrides", overrides)

    def _check_ranges(self) -> None:
        """Every range a user can get wrong, checked once here; the message names the flag to change."""
        at_least = {
            "steps": 1, "global_batch_size": 1, "log_every_steps": 1, "checkpoint_every_steps": 1,
            "num_checkpoints_to_keep": 1, "max_failures": 0, "max_preemption_failures": -1, "rankme_every_steps": 0,
            "shuffle_buffer_crops": 0, "validation_every_steps": 0, "validation_patience": 1,
            "validation_num_clips": 1, "system_metrics_every_s": 0,
            # Ray Train's num_workers=0 "local mode" neither persists checkpoints nor retries.
            "num_workers": 1,
        }  # fmt: skip
        if self.warmup_steps is not None:
            at_least["warmup_steps"] = 0
        for name, lowest in at_least.items():
            if getattr(self, name) < lowest:
                raise ValueError(f"{_flag(name)} must be at least {lowest}, got {getattr(self, name)}")
        if self.rankme_n is not None and self.rankme_n < MIN_POOL_CROPS:
            raise ValueError(
                f"{_flag('rankme_n')} must be at least {MIN_POOL_CROPS}, got {self.rankme_n}: the RankMe of one embedding "
                "is 1 whatever the model (a pool under 8 x the embedding width is recorded as capped)"
            )
        if self.crop_frames is not None and self.crop_frames < 1:
            raise ValueError(f"{_flag('crop_frames')} must be a positive number of frames, got {self.crop_frames}")
        if self.mask_ratio is not None:
            check_mask_ratio(self.mask_ratio, where=_flag("mask_ratio"))
        if self.base_lr <= 0 or self.weight_decay < 0 or self.grad_clip_norm < 0 or self.adam_eps <= 0:
            raise ValueError(
                f"need --lr > 0, --weight-decay >= 0, --grad-clip-norm >= 0 (0: off), --adam-eps > 0; got "
                f"{self.base_lr}, {self.weight_decay}, {self.grad_clip_norm}, {self.adam_eps}"
            )
        if any(not 0 <= step <= self.steps for step in self.checkpoint_steps):
            raise ValueError(f"--checkpoint-steps must lie in 0..--steps ({self.steps}); got {self.checkpoint_steps}")
        if any(step < 1 for step in self.rankme_steps) or not 0.0 <= self.validation_fraction < 1.0:
            raise ValueError(
                f"need --rankme-steps >= 1 and --validation-fraction in [0, 1); got {self.rankme_steps}, "
                f"{self.validation_fraction}"
            )
        # --peak-lr 0 is allowed on purpose: every weight stays as initialised (AdamW's decoupled decay
        # is scaled by the lr too) and only running statistics move, a control for the readout.
        if self.optimizer not in OPTIMIZERS or (self.peak_lr is not None and self.peak_lr < 0):
            raise ValueError(
                f"--optimizer must be one of {OPTIMIZERS} and --peak-lr >= 0; got {self.optimizer!r}, {self.peak_lr}"
            )
        if self.precision not in (None, *PRECISIONS):
            raise ValueError(f"--precision must be one of {PRECISIONS}, got {self.precision!r}")
        if self.checkpoint_upload not in CHECKPOINT_UPLOADS:
            raise ValueError(f"--checkpoint-upload must be one of {CHECKPOINT_UPLOADS}, got {self.checkpoint_upload!r}")
        if self.placement_strategy not in PLACEMENT_STRATEGIES:
            raise ValueError(f"placement_strategy {self.placement_strategy!r} is not one of {PLACEMENT_STRATEGIES}")

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
        """`models.build_model` keyword arguments: the overrides plus the crop and mask ratio if set."""
        run_level = {name: getattr(self, name) for name in RUN_LEVEL_MODEL_FIELDS if getattr(self, name) is not None}
        overrides = {**self.model_overrides, **run_level}
        if is_uri(overrides.get("codebook", "")):  # a codebook in a bucket: this machine's copy of it
            from pipeline.targets.stored_codebook import local_codebook  # only HuBERT runs need the target stage

            overrides["codebook"] = str(local_codebook(overrides["codebook"]))
        return overrides

    def describe_model(self) -> ModelFacts:
        """The model's spec, sizes and FLOPs from a build without weights."""
        return describe_model(self.model_name, self.model_build_overrides())

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
        cpus = self.cpus_per_worker or default_worker_cpus(self.num_workers, cluster_cpus or 2.0)
        default_shards = paths.shards_dir_for(preset_name=model.spec.frontend_preset, max_hours=None)
        return ResolvedPretrainConfig(
            **self.to_dict()
            | dict(
                shard_fingerprint=shard_fingerprint or self.shard_fingerprint,
                crop_frames=model.spec.crop_frames,
                mask_ratio=model.spec.mask_ratio,
                shards_dir=str(self.shards_dir or default_shards),
                run_name=self.run_name or f"{self.model_name}-{stamp}",
                storage_path=_absolute_storage_path(self.storage_path),
                tracking_uri=resolve_tracking_uri(self.tracking_uri),
                warmup_steps=self.effective_warmup_steps,
                micro_batch_size=self.effective_micro_batch_size,
                cpus_per_worker=cpus,
            )
        )

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


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
    hands it to Ray as a dict and each worker rebuilds it (`ResolvedPretrainConfig(**config_dict)`),
    which refuses a dict with any of those left to be worked out."""

    def __post_init__(self) -> None:
        super().__post_init__()
        unresolved = [name for name in RESOLVED_FIELDS if getattr(self, name) is None]
        if unresolved:
            raise ValueError(f"a resolved run needs {', '.join(unresolved)}; build it with PretrainConfig.resolved()")
        if "://" not in self.storage_path and not Path(self.storage_path).is_absolute():
            raise ValueError(f"storage_path {self.storage_path!r} is relative; resolved() makes it absolute")


def _flag(field_name: str) -> str:
    return field_flag(PretrainConfig, field_name).name


def _absolute_storage_path(storage_path: str | None) -> str:
    """Ray resolves relative storage paths per process; make local ones absolute once."""
    if storage_path is None:
        return str(paths.default_ray_storage_dir())
    if "://" in storage_path:
        return storage_path  # s3://, gs://, ... pass through
    return str(Path(storage_path).expanduser().resolve())
