"""The training recipe of a study profile: what a trial's pretraining run uses besides its grid point.

The paper profile is the study's recipe (Sec. III-B and App. B, which follow Dasheng's
dasheng_base.yaml): global batch 256, peak lr 3e-4 used as given (no batch/256 rescaling), weight
decay 0.01, 8-bit AdamW, 3 warmup epochs (an epoch is one full pass over the trial's hours) then a
cosine decay to 10% of the peak, 746,000 steps, and early stopping on validation MSE checked each
epoch. The CPU default profile keeps the paper's weight decay and cosine floor, its own measured
peak lr (CPU_PEAK_LR), the pipeline's batch (32), warmup (10%) and AdamW, and no early stop.

Each recipe also holds its profile's evaluation policy, which a study's config may override
(sweeps.study.config): the scene probe, the checkpoints scored, and the probe seeds
(`eval_seeds_for`). Both profiles log RankMe at Table III's steps (`rankme_steps_for`).
`trial_overrides` is the one place a trial's recipe turns into PretrainConfig fields;
`sweeps.study.plan` prints it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from pipeline.evaluate.probes.scene import DETERMINISTIC_PROBES
from pipeline.rankme.pool import PAPER_RANKME_N
from sweeps.protocol.arch_recipes import architecture_recipe

# Numbers the paper states, each with where it says so (tests/sweeps/protocol/test_recipe.py checks them).
STUDY_GLOBAL_BATCH = 256  # Sec. III-B and App. B: "we consistently set the batch size to 256"
STUDY_PEAK_LR = 3e-4  # App. B: "The initial learning rate is 0.0003"
STUDY_WEIGHT_DECAY = 0.01  # App. B: "the weight decay rate is 0.01"
STUDY_WARMUP_EPOCHS = 3  # App. B: "a learning rate warmup phase of 3 epochs"
STUDY_MIN_LR_RATIO = 0.1  # App. B: "decayed to 10% of its maximum value"
STUDY_TRAIN_STEPS = 746_000  # Sec. III-B and App. B: "the number of steps was uniformly set to 746,000"
STUDY_OPTIMIZER = "adamw8bit"  # App. B: "an 8-bit AdamW optimizer"
STUDY_MASK_RATIO = 0.75  # Sec. III-B and App. B: "a default masking ratio of 0.75"
# App. B names "an 8-bit AdamW optimizer" and nothing more; the study follows Dasheng (Sec. III-B), whose
# training (RicherMans/Dasheng dasheng/train/train.py L100-107: the optimizer built over model.parameters(),
# config yaml L22-25: AdamW8bit, lr 3e-4, weight decay 0.01)
# leaves bitsandbytes AdamW8bit's betas at their default (0.9, 0.999), decays every parameter (one
# group: the models' no_weight_decay() is never called) and clips no gradient (train_batch, L119-133:
# backward, then step).
DASHENG_OPTIMIZER = {"adam_betas": (0.9, 0.999), "decay_all_parameters": True, "grad_clip_norm": 0.0}
STUDY_CLIP_SECONDS = 10.0  # App. B: "processing 10-second audio clips" (Sec. III-A: 10-second clips)
RANKME_POOL_N = PAPER_RANKME_N  # Sec. III-C and App. A: RankMe of "30,000 randomly sampled data points"
TABLE_III_RANKME_STEPS = (50_000, 100_000, 200_000, 300_000)  # Table III: "step4RankMe"
TABLE_III_HEAR_STEP = 700_000  # Table III: "step4HEAR", Q at the end of training

# Our choices where the paper gives no number (docs/fidelity.md):
# - warmup is capped at this share of a run's steps: 3 epochs of 277,000 h (1.17M steps) exceed the
#   746,000-step run, and the compute grid's 2,000-step runs are shorter than one epoch of 10,666 h.
WARMUP_CAP_FRACTION = 0.1  # as the pipeline's default warmup (10% of steps)
# - validation early stopping: 5 evaluations (epochs) without a relative improvement of 0.1%.
VALIDATION_PATIENCE = 5
VALIDATION_TOLERANCE = 1e-3
VALIDATION_CLIPS = 512  # held-out crops the validation MSE is measured on
CPU_VALIDATION_EVERY_STEPS = 10  # CPU profile: an "epoch" of its tiny shards is a few steps
# CPU profile: chosen by the seeded search (benchmarks/sweep_cpu_default.py, docs/cpu-default-research.md)
# with the profile's model (sweeps.study.grids: width 128 and the anti-collapse term, weight 3): its
# checkpoints beat their initialisation beyond the paired noise on all 3 seeds. The former 5e-3
# collapsed the pooled representation (R 26.5 -> 10.3, Q falling with it); with the term, 1e-3 gained
# less (seed 0) and, at width 64, 1e-4 lost Q on 2 of 3 seeds.
CPU_PEAK_LR = 3e-4
# CPU profile: a shuffle buffer over a whole epoch of the default corpus (3,054 rows). Prep writes
# part files in listing order, so the default corpus's sources (speech, drums, melodies, ...) sit
# in runs of files, and the pipeline's 256-crop buffer spans ~3 files: batches of one or two
# sources. Drawing from the whole epoch is what the in-process sweep does; it did not by itself
# close the gap between the two (docs/results.md, the default study).
CPU_SHUFFLE_BUFFER_CROPS = 4096


@dataclass(frozen=True, kw_only=True)
class Recipe:
    """A profile's training recipe; None: PretrainConfig's default (the pipeline's own)."""

    global_batch_size: int | None
    peak_lr: float | None  # used as given; None: --lr scaled by batch / 256
    weight_decay: float | None
    warmup_epochs: float | None  # None: PretrainConfig's default warmup (10% of steps)
    min_lr_ratio: float | None
    optimizer: str | None
    validation_every_epoch: bool  # False: every CPU_VALIDATION_EVERY_STEPS steps
    validation_stop: bool  # stop once converged (the study's early stop); False: only record `converged`
    rankme_n: int | None  # crops in the RankMe pool; None: the pipeline's (30,000, or every crop there is)
    shuffle_buffer_crops: int | None  # None: the pipeline's buffer
    # How a study of this profile scores its trials, unless its config says otherwise (sweeps.study.config).
    probe: str  # the scene probe (pipeline.evaluate.probes.scene.SCENE_PROBES)
    eval_checkpoints: str  # EVAL_CHECKPOINTS: which checkpoints of a trial are scored besides the last
    probe_seeds: int  # repetitions of a probe with random state (a deterministic probe needs one: `eval_seeds_for`)
    # The reference points a study measures on its own tasks with its own probe before its trials
    # (pipeline.evaluate.baselines), and the positive control's supervised steps.
    baselines: tuple[str, ...]
    control_steps: int
    # Where the paper is silent and Dasheng's training code decides (None: the pipeline's MAE defaults).
    adam_betas: tuple[float, float] | None = None
    decay_all_parameters: bool | None = None
    grad_clip_norm: float | None = None


RECIPES = {
    "paper": Recipe(
        global_batch_size=STUDY_GLOBAL_BATCH,
        peak_lr=STUDY_PEAK_LR,
        weight_decay=STUDY_WEIGHT_DECAY,
        warmup_epochs=STUDY_WARMUP_EPOCHS,
        min_lr_ratio=STUDY_MIN_LR_RATIO,
        optimizer=STUDY_OPTIMIZER,
        validation_every_epoch=True,
        validation_stop=True,  # Sec. III-B: "unless early stopping is triggered on small-scale data"
        rankme_n=RANKME_POOL_N,  # the paper's pool size
        shuffle_buffer_crops=None,
        probe="appc",  # the study's own probe, paper App. C (full grid, stop on validation loss)
        eval_checkpoints="final",  # Table III: Q at the end of training (step4HEAR)
        probe_seeds=3,  # the MLP's seed noise measured at three repetitions, the pipeline's default
        # The naive features only: a ViT-B initialisation and its supervised control, embedded and trained
        # on the HEAR tasks by the study's driver process, belong on a GPU (`--baselines` adds them).
        baselines=("naive",),
        control_steps=4000,
        **DASHENG_OPTIMIZER,
    ),
    # The CPU default, chosen by benchmarks/sweep_cpu_default.py (docs/cpu-default-research.md):
    # the pipeline's 1.5e-4 x 32 / 256 = 1.9e-5 moves no weight in minutes; CPU_PEAK_LR moves R and Q
    # within the first 300 steps. Weight decay and the cosine floor are the paper's (App. B).
    "cpu_default": Recipe(
        global_batch_size=None,
        peak_lr=CPU_PEAK_LR,
        weight_decay=STUDY_WEIGHT_DECAY,
        warmup_epochs=None,
        min_lr_ratio=STUDY_MIN_LR_RATIO,
        optimizer=None,
        validation_every_epoch=False,
        validation_stop=False,  # the CPU study keeps its full horizon; `converged` is recorded
        rankme_n=None,  # the pipeline's: 30,000 or every crop the tiny shards hold
        shuffle_buffer_crops=CPU_SHUFFLE_BUFFER_CROPS,
        # kNN: deterministic (no seed noise) and ~1 s of probe time per checkpoint, so a trial can score
        # all its checkpoints in a study of minutes (benchmarks/bench_probes.py).
        probe="knn",
        eval_checkpoints="all",  # its Q(R) points are checkpoints (Fig. 1a under compute constraints)
        probe_seeds=2,  # an MLP probe asked for on CPU: two seeds keep the study within minutes
        baselines=("naive", "initialisation", "control"),
        # ~570 steps per default task: the control's loss has fallen (2.3 -> 0.6) and it beats the
        # initialisation beyond the paired noise on every seed; 700 steps did not
        # (benchmarks/instrument.py, docs/cpu-default-research.md).
        control_steps=4000,
    ),
}


def rankme_steps_for(train_steps: int) -> tuple[int, ...]:
    """Table III's RankMe steps (50k, 100k, 200k, 300k of a 700k run), and the last step.

    A run of 700,000 steps or more logs at exactly Table III's steps; a shorter one (the CPU
    profile, the compute grid) at the same fractions of its own horizon, rounded."""
    reference = min(train_steps, TABLE_III_HEAR_STEP)
    scaled = {max(1, round(step * reference / TABLE_III_HEAR_STEP)) for step in TABLE_III_RANKME_STEPS}
    return tuple(sorted(step for step in scaled | {train_steps} if step <= train_steps))


EVAL_CHECKPOINTS = ("all", "final")
# Checkpoints at 1/2, 1/4, ... of the first Table III step (ours, not the paper's): none. They bridged the
# former CPU default's collapse (R 26.5 -> 14 before step 21); the current default does not collapse.
EARLY_HALVINGS = 0


def eval_seeds_for(profile: str, probe: str) -> int:
    """Probe repetitions per task: one for a deterministic probe (linear, kNN: every seed repeats one
    score, so a second measures nothing), else the profile recipe's `probe_seeds`."""
    return 1 if probe in DETERMINISTIC_PROBES else RECIPES[profile].probe_seeds


def evaluation_steps_for(train_steps: int, which: str) -> tuple[int, ...]:
    """Checkpoints a trial evaluates (R and Q) besides the last: "all" is the initialisation, the
    first Table III step halved EARLY_HALVINGS times, and Table III's RankMe steps (Fig. 1a's
    checkpoints under compute constraints); "final" none.

    The halvings are ours, for a recipe whose representation changes before the first Table III
    step (docs/cpu-default-research.md); EARLY_HALVINGS = 0 gives Table III's checkpoints alone."""
    if which not in EVAL_CHECKPOINTS:
        raise ValueError(f"--eval-checkpoints must be one of {', '.join(EVAL_CHECKPOINTS)}, got {which!r}")
    if which == "final":
        return ()
    table_iii = rankme_steps_for(train_steps)
    early = {max(1, round(table_iii[0] / 2**k)) for k in range(1, EARLY_HALVINGS + 1)}
    return tuple(sorted({0, *early, *table_iii}))


def steps_per_epoch(hours: float, global_batch_size: int) -> int:
    """Optimizer steps of one full pass over `hours` of 10 s clips (App. B: no sampling per epoch)."""
    clips = hours * 3600.0 / STUDY_CLIP_SECONDS
    return max(1, math.ceil(clips / global_batch_size))


def warmup_steps_for(recipe: Recipe, *, hours: float | None, train_steps: int, global_batch_size: int) -> int | None:
    """The recipe's warmup in steps (epochs x steps per epoch, capped); None: the pipeline default."""
    if recipe.warmup_epochs is None or hours is None:
        return None
    epochs = math.ceil(recipe.warmup_epochs * steps_per_epoch(hours, global_batch_size))
    return min(epochs, math.ceil(WARMUP_CAP_FRACTION * train_steps))


def validation_every_for(recipe: Recipe, *, hours: float | None, global_batch_size: int) -> int:
    """Steps between validation-MSE checks: one epoch (paper), or a fixed short cadence (CPU)."""
    if recipe.validation_every_epoch and hours is not None:
        return steps_per_epoch(hours, global_batch_size)
    return CPU_VALIDATION_EVERY_STEPS


def trial_overrides(
    profile: str, *, train_steps: int, hours: float | None, context_batch: int, model_name: str | None = None
) -> dict[str, Any]:
    """PretrainConfig fields of one trial of `profile` (hours: the trial's training hours). A paper-profile
    trial of a non-MAE architecture takes its own paper's recipe (sweeps.protocol.arch_recipes)."""
    recipe = RECIPES[profile]
    own = architecture_recipe(model_name) if profile == "paper" and model_name else None
    batch = own.global_batch_size if own else recipe.global_batch_size or context_batch
    fields: dict[str, Any] = {
        "global_batch_size": batch,
        "rankme_steps": rankme_steps_for(train_steps),
        "rankme_every_steps": 0,  # the explicit steps above replace the cadence
        "validation_every_steps": validation_every_for(recipe, hours=hours, global_batch_size=batch),
        "validation_patience": VALIDATION_PATIENCE,
        "validation_tolerance": VALIDATION_TOLERANCE,
        "validation_num_clips": VALIDATION_CLIPS,
        "validation_stop": recipe.validation_stop,
    }
    warmup = warmup_steps_for(recipe, hours=hours, train_steps=train_steps, global_batch_size=batch)
    chosen = {
        "peak_lr": recipe.peak_lr,
        "weight_decay": recipe.weight_decay,
        "warmup_steps": warmup,
        "min_lr_ratio": recipe.min_lr_ratio,
        "optimizer": recipe.optimizer,
        "rankme_n": recipe.rankme_n,
        "shuffle_buffer_crops": recipe.shuffle_buffer_crops,
        "adam_betas": recipe.adam_betas,
        "decay_all_parameters": recipe.decay_all_parameters,
        "grad_clip_norm": recipe.grad_clip_norm,
    }
    chosen.update(own.pretrain_fields(train_steps) if own else {})
    return {**fields, **{name: value for name, value in chosen.items() if value is not None}}
