"""`python -m sweeps.scaling --grid NAME --plan`: every trial's resolved configuration, nothing run.

A trial's pretraining fields come from `sweeps.study.recipe.trial_overrides`, the same call the real
trial makes (`sweeps.study.trial.trial_pretrain_config`), so the plan shows what would run. No Ray.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pipeline.pretrain.config import PretrainConfig
from sweeps.study.grids import TrialSpec, expand_grids
from sweeps.study.recipe import RANKME_POOL_N, trial_overrides

DEFAULT_CONTEXT_BATCH = 32  # StudyContext's global batch, which the CPU profile keeps


@dataclass(frozen=True, kw_only=True)
class PlannedTrial:
    spec: TrialSpec
    config: PretrainConfig  # the trial's pretraining config (paths and run names left unset)
    total_parameters: int
    training_flops: float  # 6 N per token x crops per step x steps (models' training_flops_per_sample)


def plan_trial(spec: TrialSpec, profile: str, *, context_batch: int = DEFAULT_CONTEXT_BATCH) -> PlannedTrial:
    recipe = trial_overrides(profile, train_steps=spec.train_steps, hours=spec.max_hours, context_batch=context_batch)
    config = PretrainConfig(
        model_name=spec.model_name,
        model_overrides=spec.model_overrides,
        mask_ratio=spec.mask_ratio,
        steps=spec.train_steps,
        **recipe,
    )
    model = config.describe_model()
    config = PretrainConfig(**{**config.to_dict(), "mask_ratio": model.spec.mask_ratio})
    return PlannedTrial(
        spec=spec,
        config=config,
        total_parameters=model.total_parameters,
        training_flops=model.training_flops_per_sample * config.global_batch_size * config.steps,
    )


def _lr_text(config: PretrainConfig) -> str:
    peak = f"peak {config.peak_lr:g} as given" if config.peak_lr else f"base {config.base_lr:g} x batch/256"
    return (
        f"lr {peak}, warmup {config.effective_warmup_steps:,} steps, cosine to {config.min_lr_ratio:.0%} of peak"
    )


def describe(trial: PlannedTrial) -> dict[str, Any]:
    """One trial's plan as labelled values, in print order."""
    config, spec = trial.config, trial.spec
    stop = "stops when converged" if config.validation_stop else "records converged only"
    return {
        "model": f"{spec.model_name}{f' {spec.model_overrides}' if spec.model_overrides else ''} "
        f"({trial.total_parameters / 1e6:.2f}M params)",
        "hours": "whole shard set" if spec.max_hours is None else f"{spec.max_hours:,g} h",
        "batch": config.global_batch_size,
        "steps": f"{config.steps:,}",
        "schedule": _lr_text(config),
        "optimizer": f"{config.optimizer}, weight decay {config.weight_decay:g}",
        "masking": f"ratio {config.mask_ratio:g}",
        "RankMe steps": ", ".join(f"{step:,}" for step in config.rankme_steps),
        "RankMe pool N": f"{RANKME_POOL_N:,} (paper, Sec. III-C / App. A)",
        "validation": f"every {config.validation_every_steps:,} steps, patience {config.validation_patience}, "
        f"tolerance {config.validation_tolerance:g} ({stop})",
        "FLOPs": f"{trial.training_flops:.3g}",
    }


def plan_text(grid: str, profile: str) -> str:
    """The whole plan: a header, then each trial with its labelled values."""
    trials = [plan_trial(spec, profile) for spec in expand_grids(grid, profile=profile)]
    lines = [f"Plan: grid {grid}, profile {profile}: {len(trials)} trial(s), nothing is run."]
    for trial in trials:
        lines.append(f"- {trial.spec.name}")
        lines += [f"    {label}: {value}" for label, value in describe(trial).items()]
    return "\n".join(lines)
