"""Validation MSE on held-out shard rows, and when a run counts as converged (plain PyTorch, no Ray).

The study monitors the reconstruction MSE on a held-out validation set each epoch and stops small
data sets early (Sec. III-A, App. B). Ours holds out a seeded share of the shard clips
(`pipeline.shards.crops`, holdout "validation": by clip id, so no clip is in both) and measures the
masked-reconstruction loss on a fixed set of their crops, with fixed masks, so two checks differ
only by the weights.

Converged (our definition; the paper states none): `patience` checks in a row, none of which lowered
the validation MSE by more than `tolerance` (relative) below the reference, the last value that did.
The reference moves only on such a fall, as in Keras' EarlyStopping with `min_delta`: were it every
new minimum, a loss falling slowly (0.05% a check against a tolerance of 0.1%) would never count as
improving and would be called converged while it falls. A run that goes on after converging (no
early stop) and then falls by more than the tolerance was not converged after all: the verdict is
withdrawn, so the run's tag says what held at its end. The step is the check that made it so.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch
from torch import nn

from pipeline.tracking.keys import CONVERGED_KEY

VALIDATION_MASK_SEED = 2_000_003  # fixed masks: every check scores the same patches
VALIDATION_BATCH_CLIPS = 32
CONVERGED_TAG = CONVERGED_KEY  # sweeps.record.trial reads it (Fig. 1b: converged checkpoints only)
CONVERGED_STEP_TAG = "converged_step"
# Beside the flag in the MLflow UI, so `converged: true` on a trial whose Q fell is not read as a
# statement about the representation.
CONVERGED_MEANING_TAG = "converged_means"
CONVERGED_MEANING = "the validation MSE of the masked reconstruction stopped falling; says nothing about Q or R"


@dataclass(kw_only=True)
class ConvergenceRule:
    """Feed it each check's validation MSE; `converged_step` is set once the rule holds."""

    patience: int
    tolerance: float
    reference: float = math.inf  # the last MSE that fell by more than `tolerance` below the one before it
    checks_since_fall: int = 0
    converged_step: int | None = None
    history: list[tuple[int, float]] = field(default_factory=list)

    def observe(self, step: int, mse: float) -> bool:
        """Record one check; True when the run is converged as of this check."""
        self.history.append((step, mse))
        if mse < self.reference * (1.0 - self.tolerance):
            self.reference, self.checks_since_fall = mse, 0
            self.converged_step = None  # it had not stopped falling after all
        else:
            self.checks_since_fall += 1
        if self.converged_step is None and self.checks_since_fall >= self.patience:
            self.converged_step = step
        return self.converged_step is not None


@torch.no_grad()
def validation_mse(model: nn.Module, crops: torch.Tensor, *, device: torch.device) -> float:
    """Mean masked-reconstruction loss over `crops` (clips, frames, n_mels), with fixed masks.

    The training RNG streams are left as they were (forked), so a check does not change training."""
    was_training = model.training
    model.eval()
    devices = [device] if device.type == "cuda" else []
    total, count = 0.0, 0
    with torch.random.fork_rng(devices=devices):
        torch.manual_seed(VALIDATION_MASK_SEED)
        for start in range(0, len(crops), VALIDATION_BATCH_CLIPS):
            batch = crops[start : start + VALIDATION_BATCH_CLIPS].to(device)
            total += float(model(batch).loss) * len(batch)
            count += len(batch)
    model.train(was_training)
    return total / max(1, count)


class ValidationSchedule:
    """Checks every `every_steps` steps (rank 0 measures; `is_due` agrees on every rank)."""

    def __init__(
        self, crops: torch.Tensor | None, *, every_steps: int, patience: int, tolerance: float, device: torch.device
    ) -> None:
        self.crops, self.every_steps, self.device = crops, every_steps, device
        self.rule = ConvergenceRule(patience=patience, tolerance=tolerance)

    def is_due(self, step: int) -> bool:
        return self.every_steps > 0 and step % self.every_steps == 0

    def check(self, model: nn.Module, step: int) -> float | None:
        """The validation MSE at a due step (rank 0 with crops), else None."""
        if self.crops is None or not self.is_due(step):
            return None
        mse = validation_mse(model, self.crops, device=self.device)
        self.rule.observe(step, mse)
        return mse

    def tags(self) -> dict[str, str]:
        """`converged` ("true"/"false"), its step and what it means, for the run's MLflow tags."""
        step = self.rule.converged_step
        return {
            CONVERGED_TAG: str(step is not None).lower(),
            CONVERGED_STEP_TAG: str(step if step else ""),
            CONVERGED_MEANING_TAG: CONVERGED_MEANING,
        }

    def agree_on_stop(self, *, world_size: int, device: torch.device) -> bool:
        """Rank 0's convergence verdict, on every rank (they must stop at the same step)."""
        verdict = torch.tensor([float(self.rule.converged_step is not None)], device=device)
        if world_size > 1:
            torch.distributed.broadcast(verdict, src=0)
        return bool(verdict.item() > 0)
