"""`python -m sweeps.scaling --grid NAME --plan`: every trial's resolved configuration and cost, nothing run.

A trial's pretraining fields come from `sweeps.protocol.recipe.trial_overrides`, the same call the real
trial makes (`sweeps.study.trainable.trial_pretrain_config`), so the plan shows what would run. Each
trial, and the study in total, is priced by `sweeps.study.cost` on the GPU, MFU and GPU count the
command gives (--gpu, --mfu, --gpus). No Ray.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pipeline.evaluate.probes.grid import ProbeTrainingConfig, full_grid
from pipeline.evaluate.probes.scene import SCENE_PROBES
from pipeline.pretrain.config import PretrainConfig
from sweeps.protocol.arch_recipes import architecture_recipe
from sweeps.protocol.early_stop_rule import checkpoint_every_steps_for
from sweeps.protocol.recipe import (
    RANKME_POOL_N,
    RECIPES,
    evaluation_steps_for,
    trial_overrides,
)
from sweeps.protocol.task_set import PAPER_TASKS, TASK_SETS
from sweeps.study.cost import (
    CHECKPOINT_BYTES_PER_PARAMETER,
    CostAssumptions,
    StudyCost,
    TrialCost,
    cost_study,
    cost_trial,
    shard_bytes_per_hour,
    trial_hours,
)
from sweeps.study.grids import TrialSpec, expand_grids

DEFAULT_CONTEXT_BATCH = 32  # the study's --batch-size default (StudyPretraining), which the CPU profile keeps
DEFAULT_ASSUMPTIONS = CostAssumptions()  # one H100 node at 40% MFU (sweeps.study.cost's defaults)


@dataclass(frozen=True, kw_only=True)
class PlannedTrial:
    spec: TrialSpec
    config: PretrainConfig  # the trial's pretraining config (paths and run names left unset)
    total_parameters: int
    training_flops: float  # 6 N per token x crops per step x steps (models' training_flops_per_sample)
    cost: TrialCost
    profile: str


def plan_trial(
    spec: TrialSpec,
    profile: str,
    *,
    context_batch: int = DEFAULT_CONTEXT_BATCH,
    eval_checkpoints: str | None = None,
    assumptions: CostAssumptions = DEFAULT_ASSUMPTIONS,
) -> PlannedTrial:
    """The trial's config as `trial_pretrain_config` builds it (checkpoints included), and its cost."""
    recipe = trial_overrides(
        profile, train_steps=spec.train_steps, hours=spec.max_hours, context_batch=context_batch,
        model_name=spec.model_name,
    )  # fmt: skip
    config = PretrainConfig.from_flat(
        model_name=spec.model_name,
        model_overrides=spec.model_overrides,
        mask_ratio=spec.mask_ratio,
        steps=spec.train_steps,
        checkpoint_every_steps=checkpoint_every_steps_for(spec.train_steps),
        checkpoint_steps=evaluation_steps_for(spec.train_steps, eval_checkpoints or RECIPES[profile].eval_checkpoints),
        **recipe,
    )
    model = config.describe_model()
    config = config.replace(mask_ratio=model.spec.mask_ratio)
    training_flops = model.training_flops_per_sample * config.training.global_batch_size * config.training.steps
    cost = cost_trial(
        config,
        training_flops=training_flops,
        parameters=model.total_parameters,
        frontend_preset=model.spec.frontend_preset,
        hours=trial_hours(spec.max_hours, profile),
        assumptions=assumptions,
    )
    return PlannedTrial(
        spec=spec, config=config, total_parameters=model.total_parameters, training_flops=training_flops, cost=cost,
        profile=profile,
    )  # fmt: skip


def _lr_text(config: PretrainConfig) -> str:
    peak = (
        f"peak {config.optim.peak_lr:g} as given"
        if config.optim.peak_lr
        else f"base {config.optim.base_lr:g} x batch/256"
    )
    decay = (
        "constant"
        if config.schedule.lr_schedule == "constant"
        else f"{config.schedule.lr_schedule} to {config.schedule.min_lr_ratio:.0%} of peak"
    )
    return f"lr {peak}, warmup {config.effective_warmup_steps:,} steps, then {decay}"


def _optimizer_text(config: PretrainConfig) -> str:
    exempt = "every parameter decayed" if config.optim.decay_all_parameters else "biases, norms and tokens undecayed"
    clip = f"clipped at {config.optim.grad_clip_norm:g}" if config.optim.grad_clip_norm > 0 else "no clipping"
    betas = ", ".join(f"{beta:g}" for beta in config.optim.adam_betas)
    return (
        f"{config.optim.optimizer}, betas ({betas}), eps {config.optim.adam_eps:g}, weight decay {config.optim.weight_decay:g} "
        f"({exempt}), {clip}"
    )


def _masking_source(spec: TrialSpec, profile: str) -> str:
    own = architecture_recipe(spec.model_name) if profile == "paper" else None
    return f": {own.masking}" if own else ""


def _recipe_source(spec: TrialSpec, profile: str) -> str:
    own = architecture_recipe(spec.model_name) if profile == "paper" else None
    if own is None:
        return "the profile's (sweeps.protocol.recipe)"
    return "its own paper's: " + "; ".join(f"{what}: {where}" for what, where in own.sources.items())


def describe(trial: PlannedTrial) -> dict[str, Any]:
    """One trial's plan as labelled values, in print order."""
    config, spec = trial.config, trial.spec
    stop = "stops when converged" if config.validation.validation_stop else "records converged only"
    return {
        "model": f"{spec.model_name}{f' {spec.model_overrides}' if spec.model_overrides else ''} "
        f"({trial.total_parameters / 1e6:.2f}M params)",
        "hours": "whole shard set" if spec.max_hours is None else f"{spec.max_hours:,g} h",
        "batch": config.training.global_batch_size,
        "steps": f"{config.training.steps:,}",
        "schedule": _lr_text(config),
        "optimizer": _optimizer_text(config),
        "recipe": _recipe_source(spec, trial.profile),
        "masking": f"ratio {config.model.mask_ratio:g}{_masking_source(spec, trial.profile)}",
        "RankMe steps": ", ".join(f"{step:,}" for step in config.rankme.rankme_steps),
        "RankMe pool N": f"{RANKME_POOL_N:,} (paper, Sec. III-C / App. A)",
        "validation": f"every {config.validation.validation_every_steps:,} steps, patience {config.validation.validation_patience}, "
        f"tolerance {config.validation.validation_tolerance:g} ({stop})",
        "FLOPs": f"{trial.training_flops:.3g}",
        **describe_cost(trial),
    }


def quality_lines(profile: str, probe: str) -> list[str]:
    """How Q is measured: the probe and the task set it averages over."""
    schedule = SCENE_PROBES[probe]
    if isinstance(schedule, ProbeTrainingConfig):
        depths = " or ".join(str(depth) for depth in schedule.hidden_layer_choices)
        how = (
            f"MLP with {depths} hidden layer(s), {schedule.grid_points} of {len(full_grid(schedule.hidden_layer_choices))} "
            f"grid settings, <= {schedule.max_epochs} epochs, stops after {schedule.patience_checks} checks "
            f"(every {schedule.validate_every_epochs} epoch(s)) without a better validation {schedule.stop_on}"
        )
    else:
        how = "deterministic, chosen on validation"
    source = " (paper App. C)" if probe == "appc" else ""
    declared = TASK_SETS.get(profile)
    tasks = (
        f"the paper's {len(declared)} HEAR scene tasks (Sec. III-D): {', '.join(PAPER_TASKS[t] for t in declared)}"
        if declared
        else "the task folder's (the embedded default tasks unless --tasks)"
    )
    return [f"Q: probe {probe}{source}: {how}", f"Q's tasks: {tasks}; Q is their mean primary score"]


def bytes_text(n_bytes: float) -> str:
    """Decimal units; MB below a gigabyte, so the CPU profile's small figures do not print as 0.00 GB."""
    if n_bytes < 1e9:
        return f"{n_bytes / 1e6:,.2f} MB"
    return f"{n_bytes / 1e9:,.2f} GB" if n_bytes < 1e12 else f"{n_bytes / 1e12:,.2f} TB"


def hours_text(hours: float) -> str:
    return f"{hours:,.1f}" if hours >= 1 else f"{hours:.2g}"


def describe_cost(trial: PlannedTrial) -> dict[str, str]:
    """The trial's GPU time and storage, with the arithmetic behind each figure."""
    cost, config = trial.cost, trial.config
    (preset, hours) = cost.shard_set
    per_parameter = CHECKPOINT_BYTES_PER_PARAMETER[config.optim.optimizer]
    return {
        "GPU-hours": f"{hours_text(cost.gpu_hours)} "
        f"({cost.gpus_per_trial} GPU, {hours_text(cost.wall_hours)} h of wall time)",
        "checkpoints": f"{cost.checkpoints_kept} kept x {bytes_text(cost.checkpoint_bytes)} "
        f"({trial.total_parameters:,} params x {per_parameter} B, {config.optim.optimizer}) = "
        f"{bytes_text(cost.kept_checkpoint_bytes)}",
        "shards": f"{hours:,g} h{' (whole set, assumed)' if trial.spec.max_hours is None else ''} "
        f"x {shard_bytes_per_hour(preset) / 1e6:.1f} MB/h ({preset}) = {bytes_text(cost.shard_bytes)}",
    }


def total_lines(study: StudyCost, assumptions: CostAssumptions, n_trials: int) -> list[str]:
    return [
        f"Total, {n_trials} trial(s) on {assumptions.gpus} {assumptions.gpu} GPU(s) at {assumptions.mfu * 100:g}% MFU:",
        f"    FLOPs: {study.training_flops:.3g} (pretraining only, each trial's full horizon)",
        f"    GPU-hours: {hours_text(study.gpu_hours)}",
        (
            f"    wall time: {hours_text(study.wall_hours)} h "
            f"({study.gpus_per_trial} GPU per trial, trials side by side, "
            f"longest first onto the least loaded GPU; {min(assumptions.gpus, n_trials * study.gpus_per_trial)} "
            f"of {assumptions.gpus} GPU(s) ever busy)"
        ),
        (
            f"    checkpoints: {bytes_text(study.checkpoint_bytes)} (every trial's kept checkpoints; "
            f"{bytes_text(study.plain_adamw_checkpoint_bytes)} where plain AdamW runs, 12 B/param)"
        ),
        f"    shards: {bytes_text(study.shard_bytes)} ({study.shard_sets} shard set(s), one per preset and hours)",
    ]


def plan_text(
    grid: str,
    profile: str,
    *,
    eval_checkpoints: str | None = None,
    context_batch: int = DEFAULT_CONTEXT_BATCH,
    assumptions: CostAssumptions = DEFAULT_ASSUMPTIONS,
    objective: str = "mae",
    probe: str | None = None,
    train_seeds: int = 1,
) -> str:
    """The whole plan: a header, how Q is measured, then each trial with its labelled values, then
    the study's totals. `probe`: the study's --probe (None: the profile's)."""
    trials = [
        plan_trial(
            spec, profile, context_batch=context_batch, eval_checkpoints=eval_checkpoints, assumptions=assumptions
        )
        for spec in expand_grids(grid, profile=profile, objective=objective, train_seeds=train_seeds)
    ]
    lines = [f"Plan: grid {grid}, profile {profile}: {len(trials)} trial(s), nothing is run."]
    lines += quality_lines(profile, probe or RECIPES[profile].probe)
    for trial in trials:
        lines.append(f"- {trial.spec.name}")
        lines += [f"    {label}: {value}" for label, value in describe(trial).items()]
    lines += total_lines(cost_study([trial.cost for trial in trials], assumptions), assumptions, len(trials))
    return "\n".join(lines)
