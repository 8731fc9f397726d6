"""On resume, the settings that shape training must match the checkpoint's, or the run refuses.

A run resumed under the same --run-name restores the optimizer and schedule state from its newest
checkpoint, so a changed --lr or --warmup-steps never takes full effect while MLflow would record
the new value. The driver compares the new resolved config with the `pretrain_config` the newest
checkpoint saved: a difference in a TRAINING_FIELDS setting is refused with the list, unless
`--allow-changed` names it (the run then records what changed, tag `resume_allowed_changes`).
`--steps` may always grow or shrink: that is how a run is extended (the schedule is rebuilt for it).
Settings that only say where or how often (workers, storage, logging) may change freely.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pipeline.checkpoint import read_checkpoint_meta
from pipeline.cli.errors import UserError
from pipeline.cli.flags import field_flag
from pipeline.pretrain.config import PretrainConfig, ResolvedPretrainConfig

# What the weights, optimizer state and measured values depend on.
TRAINING_FIELDS = (
    "model_name", "model_overrides", "mask_ratio", "crop_frames", "shard_fingerprint", "rankme_shards_dir",
    "global_batch_size", "base_lr", "weight_decay", "warmup_steps", "min_lr_ratio", "grad_clip_norm", "peak_lr",
    "optimizer", "seed", "rankme_n", "validation_fraction", "shuffle_buffer_crops", "adam_betas", "adam_eps",
    "decay_all_parameters", "lr_schedule",
)  # fmt: skip
# Fields added after checkpoints were first written: a checkpoint without one trained with this value.
DEFAULTS_OF_LATER_FIELDS = {
    "adam_betas": [0.9, 0.95],
    "adam_eps": 1e-8,
    "decay_all_parameters": False,
    "lr_schedule": "cosine",
}


def newest_checkpoint_config(storage_path: str, run_name: str) -> tuple[Path, dict[str, Any]] | None:
    """(checkpoint dir, its saved resolved config) of the run's newest readable local checkpoint."""
    if "://" in storage_path:
        return None  # cloud storage: Ray resumes from it; the comparison reads local checkpoints only
    found = sorted((Path(storage_path) / run_name).glob("**/checkpoint_step_*/model.json"), key=lambda p: p.parent.name)
    for meta_path in reversed(found):
        try:
            saved = read_checkpoint_meta(meta_path.parent).get("pretrain_config")
        except (OSError, ValueError):
            continue  # a damaged checkpoint: Ray's own resume will have to say so
        if saved:
            return meta_path.parent, saved
    return None


def resume_differences(saved: dict[str, Any], config: PretrainConfig) -> dict[str, tuple[Any, Any]]:
    """{field: (checkpoint's value, new value)} for every TRAINING_FIELDS setting that differs."""
    new = json.loads(json.dumps(config.to_dict(), default=str))  # the checkpoint's JSON round trip
    saved = {**DEFAULTS_OF_LATER_FIELDS, **saved}
    return {name: (saved.get(name), new.get(name)) for name in TRAINING_FIELDS if saved.get(name) != new.get(name)}


def check_resume(
    config: ResolvedPretrainConfig, *, warmup_given: bool
) -> tuple[ResolvedPretrainConfig, dict[str, str]]:
    """Refuse a resume whose training settings differ from its checkpoint's unless allowed; returns
    the config (a warmup not given keeps the checkpoint's, not 10% of the new --steps) and the
    allowed changes as `{flag: "old -> new"}` for the run to record ({} for a fresh run)."""
    found = newest_checkpoint_config(config.checkpoint.storage_path, config.tracking.run_name)
    if found is None:
        return config, {}
    checkpoint_dir, saved = found
    if not warmup_given and saved.get("warmup_steps") is not None:
        config = config.replace(warmup_steps=int(saved["warmup_steps"]))
    changes = {_flag(name): f"{old} -> {new}" for name, (old, new) in resume_differences(saved, config).items()}
    allowed = {_normalise(name) for name in config.checkpoint.allow_changed}
    refused = {flag: change for flag, change in changes.items() if _normalise(flag) not in allowed}
    if refused:
        listed = "; ".join(f"{flag} {change}" for flag, change in refused.items())
        raise UserError(
            f"run {config.tracking.run_name!r} resumes from {checkpoint_dir}, trained with other settings: {listed}. Give the "
            f"checkpoint's values, a new --run-name, or --allow-changed {','.join(f.lstrip('-') for f in refused)}"
        )
    return config, changes


def _flag(field_name: str) -> str:
    if field_name == "shard_fingerprint":
        return "--shards (fingerprint)"
    return field_flag(PretrainConfig, field_name).name


def _normalise(name: str) -> str:
    return name.split(" ")[0].lstrip("-").replace("_", "-")
