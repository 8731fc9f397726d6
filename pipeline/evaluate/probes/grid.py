"""The HEAR hyper-parameter grid with early stopping: one seed, one train/valid/test split.

Protocol (reference/evaluation.md, issue 6): lr {3.2e-3, 1e-3, 3.2e-4, 1e-4} x hidden layers {1, 2}
x Xavier {uniform, normal}; HEAR samples 8 of these 16 points per run (`grid_points`, all 16 on
request); batch 1024; validation every 3 epochs; a config stops after 20 validation checks without
a strictly better validation score, or at 500 epochs; the config with the best validation score is
chosen and its test score at its best validation check is reported (the same number as restoring
that checkpoint and testing it, without keeping weights around).

The RankMe study's probe (paper App. C) is a named schedule beside HEAR's ("appc"): the full
16-point grid, at most 500 epochs, and a config stops when its validation *loss* (CE, or BCE for
multi-label tasks) has not decreased for 20 consecutive epochs; the config with the best
validation score is chosen, as in HEAR.
"""

from __future__ import annotations

import itertools
import random
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from pipeline.evaluate.probes.metrics import score_predictions
from pipeline.evaluate.probes.mlp import ProbeConfig, StackedProbeMLPs

LEARNING_RATES = (3.2e-3, 1e-3, 3.2e-4, 1e-4)
HIDDEN_LAYER_CHOICES = (1, 2)
INITS = ("xavier_uniform", "xavier_normal")
STOP_ON = ("score", "loss")


@dataclass(frozen=True, kw_only=True)
class ProbeTrainingConfig:
    """Training schedule of the HEAR predictor; the defaults are HEAR's."""

    schedule: str = "hear"  # the named schedule these values start from (PROBE_SCHEDULES); recorded with results
    batch_size: int = 1024
    max_epochs: int = 500
    validate_every_epochs: int = 3
    patience_checks: int = 20
    grid_points: int = 8  # HEAR samples 8 of the 16 grid points; 16 runs the full grid
    hidden_layer_choices: tuple[int, ...] = HIDDEN_LAYER_CHOICES  # depths the grid may sample
    stop_on: str = "score"  # patience counts checks without a better validation "score" (HEAR) or "loss" (App. C)

    def __post_init__(self) -> None:
        if self.stop_on not in STOP_ON:
            raise ValueError(f"stop_on must be one of {STOP_ON}, got {self.stop_on!r}")


# HEAR's schedule costs ~0.5 s per epoch per task on 2 CPU cores (1,000 clips, 1024-wide stacked
# MLPs; the 1024 x 1024 second layer dominates), i.e. tens of minutes per checkpoint. CPU studies
# score every trial, so their default profile uses this cheaper schedule: the same probe family
# with one hidden layer of 1024, 2 of its 8 grid points, at most 45 epochs, patience 5 checks.
QUICK_PROBE_TRAINING = ProbeTrainingConfig(
    schedule="quick", max_epochs=45, patience_checks=5, grid_points=2, hidden_layer_choices=(1,)
)
# Paper App. C: "a grid search over: learning rates in [3.2e-3, 1e-3, 3.2e-4, 1e-4], number of MLP layers
# in [1, 2] and initialization methods of Xavier ... uniform or normal" (all 16), "a maximum epoch setting
# of 500", "Training halts when the validation loss fails to decrease for 20 consecutive epochs".
APP_C_PROBE_TRAINING = ProbeTrainingConfig(
    schedule="appc", max_epochs=500, validate_every_epochs=1, patience_checks=20, grid_points=16, stop_on="loss"
)
PROBE_SCHEDULES = {"hear": ProbeTrainingConfig(), "quick": QUICK_PROBE_TRAINING, "appc": APP_C_PROBE_TRAINING}


def probe_schedule(name: str) -> ProbeTrainingConfig:
    """The named probe schedule ("hear" | "quick" | "appc")."""
    if name not in PROBE_SCHEDULES:
        raise ValueError(f"unknown probe schedule {name!r}; choose one of {', '.join(PROBE_SCHEDULES)}")
    return PROBE_SCHEDULES[name]


@dataclass(frozen=True, kw_only=True)
class GridResult:
    best_config: ProbeConfig
    validation_score: float
    test_score: float
    epochs_trained: dict[ProbeConfig, int]


@dataclass(frozen=True, kw_only=True)
class SplitArrays:
    """Scene embeddings and targets of one split: features (n, dim) float32; targets (n,) long or
    (n, classes) float multi-hot."""

    features: torch.Tensor
    targets: torch.Tensor


def full_grid(hidden_layer_choices: tuple[int, ...] = HIDDEN_LAYER_CHOICES) -> list[ProbeConfig]:
    return [
        ProbeConfig(learning_rate=lr, hidden_layers=layers, init=init)
        for lr, layers, init in itertools.product(LEARNING_RATES, hidden_layer_choices, INITS)
    ]


def sample_grid(
    grid_points: int, seed: int, hidden_layer_choices: tuple[int, ...] = HIDDEN_LAYER_CHOICES
) -> list[ProbeConfig]:
    grid = full_grid(hidden_layer_choices)
    if not 1 <= grid_points <= len(grid):
        raise ValueError(f"grid_points must be in 1..{len(grid)}, got {grid_points}")
    if grid_points == len(grid):
        return grid
    chosen = sorted(random.Random(seed).sample(range(len(grid)), grid_points))
    return [grid[i] for i in chosen]


@dataclass
class _ConfigProgress:
    best_validation: float = -np.inf
    test_at_best: float = np.nan
    best_loss: float = np.inf
    checks_since_best: int = 0  # of the quantity the schedule stops on
    epochs: int = 0


def validation_losses(logits: torch.Tensor, targets: torch.Tensor, *, multilabel: bool) -> list[float]:
    """Each config's mean validation loss from logits (configs, n, out): BCE for multi-label
    targets, CE otherwise (App. C's losses, the ones the probe trains on)."""
    if multilabel:
        loss = F.binary_cross_entropy_with_logits(logits, targets.expand_as(logits), reduction="none").mean(dim=(1, 2))
    else:
        loss = F.cross_entropy(logits.transpose(1, 2), targets.expand(logits.shape[0], -1), reduction="none")
        loss = loss.mean(dim=1)
    return loss.tolist()


def run_probe_grid(
    *,
    train: SplitArrays,
    valid: SplitArrays,
    test: SplitArrays,
    n_classes: int,
    metric: str,
    multilabel: bool,
    seed: int,
    training: ProbeTrainingConfig = ProbeTrainingConfig(),
    class_labels: list[str] | None = None,
) -> GridResult:
    """Train the sampled grid for one seed and return the validation-chosen config's test score."""
    configs = sample_grid(training.grid_points, seed, training.hidden_layer_choices)
    torch.manual_seed(seed)  # dropout masks
    stacks = [
        StackedProbeMLPs(
            [c for c in configs if c.hidden_layers == depth],
            in_features=train.features.shape[1],
            out_features=n_classes,
            seed=seed * 1000 + depth,
        )
        for depth in HIDDEN_LAYER_CHOICES
        if any(c.hidden_layers == depth for c in configs)
    ]
    progress = {config: _ConfigProgress() for config in configs}
    shuffle_generator = torch.Generator().manual_seed(seed)
    n_train = len(train.features)
    for epoch in range(1, training.max_epochs + 1):
        if not stacks:
            break
        order = torch.randperm(n_train, generator=shuffle_generator)
        for start in range(0, n_train, training.batch_size):
            batch = order[start : start + training.batch_size]
            if len(batch) < 2:  # BatchNorm cannot normalise a single sample
                continue
            for stack in stacks:
                stack.train_step(train.features[batch], train.targets[batch], multilabel=multilabel)
        if epoch % training.validate_every_epochs == 0:
            stacks = _validate_and_stop(
                stacks, progress, valid, test, (metric, multilabel), class_labels, epoch, training
            )
    for stack in stacks:
        for config in stack.configs:
            progress[config].epochs = training.max_epochs
    best_config = max(configs, key=lambda c: (progress[c].best_validation, -configs.index(c)))
    return GridResult(
        best_config=best_config,
        validation_score=float(progress[best_config].best_validation),
        test_score=float(progress[best_config].test_at_best),
        epochs_trained={c: progress[c].epochs for c in configs},
    )


def _validate_and_stop(
    stacks: list[StackedProbeMLPs],
    progress: dict[ProbeConfig, _ConfigProgress],
    valid: SplitArrays,
    test: SplitArrays,
    task: tuple[str, bool],
    class_labels: list[str] | None,
    epoch: int,
    training: ProbeTrainingConfig,
) -> list[StackedProbeMLPs]:
    """Update each config's best validation score (and loss); drop configs whose patience ran out.
    `task`: (metric, multilabel)."""
    metric, multilabel = task
    still_running = []
    for stack in stacks:
        logits = stack.predict(valid.features)
        validation_scores = score_predictions(metric, logits, valid.targets, class_labels=class_labels)
        losses = validation_losses(logits, valid.targets, multilabel=multilabel)
        test_scores = score_predictions(metric, stack.predict(test.features), test.targets, class_labels=class_labels)
        keep = []
        for index, config in enumerate(stack.configs):
            state = progress[config]
            better_score = validation_scores[index] > state.best_validation
            if better_score:
                state.best_validation = validation_scores[index]
                state.test_at_best = test_scores[index]
            better_loss = losses[index] < state.best_loss
            state.best_loss = min(state.best_loss, losses[index])
            improved = better_loss if training.stop_on == "loss" else better_score
            state.checks_since_best = 0 if improved else state.checks_since_best + 1
            if state.checks_since_best >= training.patience_checks:
                state.epochs = epoch
            else:
                keep.append(index)
        if len(keep) == len(stack.configs):
            still_running.append(stack)
        elif keep:
            stack.keep(keep)
            still_running.append(stack)
    return still_running
