"""The HEAR probe: learns what is learnable, nothing from random labels, honest intervals."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from pipeline.evaluate.probes.grid import (
    APP_C_PROBE_TRAINING,
    PROBE_SCHEDULES,
    QUICK_PROBE_TRAINING,
    ProbeTrainingConfig,
    full_grid,
    run_probe_grid,
    sample_grid,
    validation_losses,
)
from pipeline.evaluate.probes.metrics import score_predictions
from pipeline.evaluate.probes.mlp import HIDDEN_UNITS, StackedProbeMLPs
from pipeline.evaluate.probes.scene import probe_task, split_arrays
from pipeline.task_format.reader import TaskInfo

# A short schedule keeps the tests fast; the protocol itself (grid, patience, validation cadence)
# is unchanged.
QUICK = ProbeTrainingConfig(max_epochs=30, patience_checks=4, grid_points=4)


def _blobs(n: int, n_classes: int, dim: int, *, separation: float, seed: int, random_labels: bool = False):
    rng = np.random.default_rng(seed)
    centres = np.random.default_rng(0).standard_normal((n_classes, dim)) * separation
    labels = rng.integers(0, n_classes, n)
    features = centres[labels] + rng.standard_normal((n, dim))
    if random_labels:
        labels = rng.integers(0, n_classes, n)
    return split_arrays(features.astype(np.float32), labels.astype(np.int64))


def _task(n_classes: int) -> TaskInfo:
    return TaskInfo(
        name="blobs",
        directory=None,
        prediction_type="multiclass",
        primary_metric="top1_acc",
        split_mode="trainvaltest",
        splits=("train", "valid", "test"),
        labels=tuple(str(i) for i in range(n_classes)),
    )


def test_grid_is_the_hear_grid():
    grid = full_grid()
    assert len(grid) == 16
    assert {c.learning_rate for c in grid} == {3.2e-3, 1e-3, 3.2e-4, 1e-4}
    assert {c.hidden_layers for c in grid} == {1, 2}
    assert {c.init for c in grid} == {"xavier_uniform", "xavier_normal"}
    assert len(sample_grid(8, seed=0)) == 8
    assert sample_grid(8, seed=0) == sample_grid(8, seed=0)
    assert sample_grid(8, seed=0) != sample_grid(8, seed=1)


def test_stacked_mlp_has_hear_shapes_and_config_independent_training():
    configs = full_grid()[:2]  # same depth (1 hidden layer), two inits, same lr
    stack = StackedProbeMLPs(configs, in_features=5, out_features=3, seed=0)
    assert [tuple(w.shape) for w in stack.weights] == [(2, 5, HIDDEN_UNITS), (2, HIDDEN_UNITS, 3)]
    features, targets = torch.randn(64, 5), torch.randint(0, 3, (64,))
    before = [w.detach().clone() for w in stack.weights]
    # Training only config 0 (via keep) must give config 0 the same weights as training both.
    torch.manual_seed(1)
    stack.train_step(features, targets, multilabel=False)
    alone = StackedProbeMLPs(configs, in_features=5, out_features=3, seed=0)
    alone.keep([0])
    torch.manual_seed(1)
    alone.train_step(features, targets, multilabel=False)
    assert not torch.equal(stack.weights[0][0], before[0][0])
    # Dropout masks differ between the stacked and the lone run, so compare the output layer's
    # bias update, which depends on dropout only through a mean: close, not equal.
    torch.testing.assert_close(alone.biases[-1][0], stack.biases[-1][0], atol=5e-3, rtol=0)


def test_probe_reaches_full_accuracy_on_separable_task():
    train, valid, test = (_blobs(n, 4, 16, separation=4.0, seed=s) for n, s in ((300, 1), (100, 2), (100, 3)))
    result = run_probe_grid(
        train=train, valid=valid, test=test, n_classes=4, metric="top1_acc", multilabel=False, seed=0, training=QUICK
    )
    assert result.test_score >= 0.98
    assert result.validation_score >= 0.98


def test_probe_stays_near_chance_on_random_labels():
    train, valid, test = (
        _blobs(n, 4, 16, separation=4.0, seed=s, random_labels=True) for n, s in ((300, 1), (200, 2), (400, 3))
    )
    score, _ = probe_task(_task(4), {"train": train, "valid": valid, "test": test}, seeds=2, training=QUICK)
    assert abs(score.mean - 0.25) < 0.08


def test_confidence_interval_narrows_with_more_seeds():
    splits = {
        name: _blobs(n, 3, 8, separation=0.7, seed=s)
        for name, n, s in (("train", 150, 1), ("valid", 60, 2), ("test", 60, 3))
    }
    quick = ProbeTrainingConfig(max_epochs=9, patience_checks=2, grid_points=2)
    few, _ = probe_task(_task(3), splits, seeds=2, training=quick)
    many, _ = probe_task(_task(3), splits, seeds=5, training=quick)
    assert few.ci_low < few.mean < few.ci_high
    assert (many.ci_high - many.ci_low) < (few.ci_high - few.ci_low)
    assert len(many.seed_scores) == 5


def test_early_stopping_stops_a_config_after_patience_checks():
    train, valid, test = (_blobs(n, 2, 4, separation=6.0, seed=s) for n, s in ((200, 1), (50, 2), (50, 3)))
    training = ProbeTrainingConfig(max_epochs=300, validate_every_epochs=3, patience_checks=5, grid_points=2)
    result = run_probe_grid(
        train=train, valid=valid, test=test, n_classes=2, metric="top1_acc", multilabel=False, seed=0, training=training
    )
    # Validation accuracy saturates at 1.0 almost at once, so every config stops after 5 checks
    # without a strictly better score: long before 300 epochs, on a multiple of 3.
    assert all(epochs < 60 and epochs % 3 == 0 for epochs in result.epochs_trained.values())


def test_app_c_schedule_is_the_papers_probe():
    # Paper App. C: the full grid (4 lr x 2 depths x 2 Xavier inits), <= 500 epochs, stop when the
    # validation loss has not decreased for 20 consecutive epochs.
    assert PROBE_SCHEDULES["appc"] is APP_C_PROBE_TRAINING
    appc = APP_C_PROBE_TRAINING
    assert (appc.grid_points, appc.max_epochs, appc.patience_checks, appc.validate_every_epochs) == (16, 500, 20, 1)
    assert appc.stop_on == "loss" and appc.hidden_layer_choices == (1, 2)
    assert PROBE_SCHEDULES["hear"].stop_on == "score"  # HEAR's kit stays as it was, as a named alternative
    with pytest.raises(ValueError, match="stop_on"):
        ProbeTrainingConfig(stop_on="accuracy")


def test_validation_losses_are_the_training_losses_per_config():
    logits = torch.tensor([[[2.0, 0.0], [0.0, 1.0]], [[0.0, 0.0], [0.0, 0.0]]])  # (configs, n, classes)
    targets = torch.tensor([0, 1])
    expected = [float(torch.nn.functional.cross_entropy(logits[c], targets)) for c in range(2)]
    assert validation_losses(logits, targets, multilabel=False) == pytest.approx(expected)
    multi = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    bce = float(torch.nn.functional.binary_cross_entropy_with_logits(logits[0], multi))
    assert validation_losses(logits, multi, multilabel=True)[0] == pytest.approx(bce)


def test_loss_based_stopping_outlasts_a_saturated_score_and_stops_an_overfitting_config():
    train, valid, test = (_blobs(n, 2, 4, separation=6.0, seed=s) for n, s in ((200, 1), (50, 2), (50, 3)))
    args = {"train": train, "valid": valid, "test": test, "n_classes": 2, "metric": "top1_acc", "multilabel": False}
    on_score = ProbeTrainingConfig(max_epochs=120, validate_every_epochs=1, patience_checks=5, grid_points=2)
    on_loss = ProbeTrainingConfig(
        max_epochs=120, validate_every_epochs=1, patience_checks=5, grid_points=2, stop_on="loss"
    )
    # Accuracy is 1.0 at once, so patience on the score ends early; the loss keeps falling as the
    # probe grows confident, so patience on the loss runs on.
    score_epochs = run_probe_grid(**args, seed=0, training=on_score).epochs_trained.values()
    loss_epochs = run_probe_grid(**args, seed=0, training=on_loss).epochs_trained.values()
    assert max(score_epochs) < 30 and min(loss_epochs) > 2 * max(score_epochs)
    # Random labels: the validation loss rises as the MLP memorises, so every config stops early.
    noise = [_blobs(n, 2, 4, separation=6.0, seed=s, random_labels=True) for n, s in ((200, 1), (50, 2), (50, 3))]
    noisy = run_probe_grid(**{**args, "train": noise[0], "valid": noise[1], "test": noise[2]}, seed=0, training=on_loss)
    assert max(noisy.epochs_trained.values()) < 60


def test_multilabel_probe_scores_map():
    rng = np.random.default_rng(0)

    def split(n: int) -> object:
        features = rng.standard_normal((n, 6)).astype(np.float32)
        targets = (features[:, :3] > 0).astype(np.float32)  # label k present when feature k > 0
        return split_arrays(features, targets)

    result = run_probe_grid(
        train=split(300),
        valid=split(100),
        test=split(100),
        n_classes=3,
        metric="mAP",
        multilabel=True,
        seed=0,
        training=QUICK,
    )
    assert result.test_score > 0.9


def test_metrics_on_hand_made_logits():
    logits = torch.tensor([[[2.0, 0.0], [0.0, 1.0], [3.0, 0.0]]])  # one config, 3 clips, 2 classes
    assert score_predictions("top1_acc", logits, torch.tensor([0, 1, 1])) == pytest.approx([2 / 3])
    # chroma: predicted pitch 60 for a 72 target is the same pitch class.
    assert score_predictions("chroma_acc", logits, torch.tensor([1, 1, 1]), class_labels=["60", "72"]) == pytest.approx(
        [1.0]
    )
    with pytest.raises(ValueError, match="unknown task metric"):
        score_predictions("f1", logits, torch.tensor([0, 1, 1]))


def test_each_config_gets_exactly_torch_adam_with_its_own_learning_rate():
    configs = [full_grid()[0], full_grid()[4]]  # lr 3.2e-3 and 1e-3, both one hidden layer
    stack = StackedProbeMLPs(configs, in_features=5, out_features=3, seed=0)
    start = [p.detach().clone() for p in stack.parameters()]
    gradients = tuple(torch.randn_like(p) for p in stack.parameters())
    for _ in range(3):
        stack._adam_update(stack.parameters(), gradients)
    for index, config in enumerate(configs):
        for before, gradient, after in zip(start, gradients, stack.parameters()):
            reference = before[index].clone().requires_grad_(True)
            optimizer = torch.optim.Adam([reference], lr=config.learning_rate)
            for _ in range(3):
                reference.grad = gradient[index].clone()
                optimizer.step()
            torch.testing.assert_close(after[index].detach(), reference.detach(), atol=1e-7, rtol=1e-6)


def test_quick_schedule_samples_one_hidden_layer_configs_and_still_learns():
    # The CPU studies' schedule: only the one-hidden-layer half of the grid, two points of it.
    configs = sample_grid(
        QUICK_PROBE_TRAINING.grid_points, seed=3, hidden_layer_choices=QUICK_PROBE_TRAINING.hidden_layer_choices
    )
    assert len(configs) == 2 and all(c.hidden_layers == 1 for c in configs)
    assert len(full_grid((1,))) == 8
    train, valid, test = (_blobs(n, 4, 16, separation=3.0, seed=s) for n, s in ((400, 1), (100, 2), (200, 3)))
    result = run_probe_grid(
        train=train,
        valid=valid,
        test=test,
        n_classes=4,
        metric="top1_acc",
        multilabel=False,
        seed=0,
        training=QUICK_PROBE_TRAINING,
    )
    assert result.best_config.hidden_layers == 1
    assert result.test_score >= 0.95
