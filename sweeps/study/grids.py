"""Named study grids, each with the paper's setting and a CPU default, and their Cartesian products.

    expand_grids(["size", "data_volume"], profile="cpu_default") -> [TrialSpec, ...]

A grid is an axis of points; each point sets part of a trial (model, overrides, hours, steps).
Combining grids (`--grid size,data_volume`) takes the Cartesian product and merges the parts;
two grids that both choose the model (size and arch) cannot be combined. Trial names are built
from the points' labels, so they are deterministic: a resumed study finds its finished trials.
"""

from __future__ import annotations

import dataclasses
import itertools
from dataclasses import dataclass, field, replace
from typing import Any

from sweeps.protocol.arch_recipes import architecture_recipe
from sweeps.study.arch_grid import architecture_points

PROFILES = ("paper", "cpu_default")


@dataclass(frozen=True, kw_only=True)
class GridPoint:
    label: str  # part of the trial name, e.g. "mask0.75"
    model_name: str | None = None
    arch: str | None = None
    model_overrides: dict[str, Any] = field(default_factory=dict)
    mask_ratio: float | None = None  # pretraining's --mask-ratio
    max_hours: float | None = None  # prep's --max-hours: a seeded, nested subset
    # The hours this grid's study used, when no other grid of the product sets max_hours.
    base_hours: float | None = None
    train_steps: int | None = None
    coordinate: Any = None  # the value on this grid's axis, logged with the trial
    # Table V's column for an architecture grid point: "base" or "large" (None: not in that table).
    scale: str | None = None


@dataclass(frozen=True, kw_only=True)
class TrialSpec:
    name: str
    model_name: str
    arch: str
    model_overrides: dict[str, Any]  # model config fields other than the run's mask ratio
    mask_ratio: float | None  # None: the model's own; checked by PretrainConfig (--mask-ratio)
    max_hours: float | None  # None: the whole shard set
    train_steps: int
    coordinates: dict[str, Any]  # grid name -> coordinate
    scale: str | None = None  # Table V's "base" / "large" column of an architecture point
    # The grid point this trial replicates with another training seed (--train-seeds); None: its own.
    configuration: str | None = None


@dataclass(frozen=True, kw_only=True)
class BaseTrial:
    """What a trial uses on the axes no chosen grid sets."""

    model_name: str
    arch: str
    train_steps: int
    # Overrides of the base model, kept wherever no grid point names a model (a size point sets its own
    # width and depth on top of them; an arch point's model, mae-debug included, takes none of them).
    model_overrides: dict[str, Any] = field(default_factory=dict)


BASE_TRIALS = {
    # The study's base model (en768-12, Sec. IV-B); every model trains 746,000 steps (Sec. III-B, App. B).
    "paper": BaseTrial(model_name="mae-en768-12", arch="mae", train_steps=746_000),
    # mae-debug widened to 128 (8 heads of 16) with the anti-collapse term on its pooled visible tokens
    # (models/layers/anti_collapse.py, weight 3): the setting of the seeded search whose trained
    # checkpoints beat their own initialisation beyond twice the paired noise on every one of 3 seeds
    # (docs/cpu-default-research.md), and with the calibrated readout beats it on average over 12 fresh
    # seeds (mean step-300 gain +0.018, 95% t-interval +0.009 to +0.026); 300 steps train in seconds on CPU.
    "cpu_default": BaseTrial(
        model_name="mae-debug",
        arch="mae",
        train_steps=300,
        model_overrides={"encoder_dim": 128, "encoder_heads": 8, "pooled_vc_weight": 3.0},
    ),  # fmt: skip
}

# The study's Table I sizes, (width, depth).
PAPER_SIZES = [
    (1536, 24), (1536, 12), (1024, 12), (768, 12), (512, 12), (256, 12), (128, 12), (768, 8),
    (512, 8), (256, 8), (768, 4), (512, 4), (256, 4), (768, 1), (512, 1), (256, 1),
]  # fmt: skip
# Overrides of mae-debug, (encoder_dim, encoder_depth): 32k to 500k parameters, 16-wide heads.
CPU_SIZES = [(16, 1), (32, 2), (48, 2), (64, 3), (96, 4)]
# Sec. III-A: "scaling the training data volume from 55 hours to 277,000 hours". The paper gives
# only the ends; ours: 11 log-spaced points (x2.34 each), 3 significant figures, nested subsets.
PAPER_HOURS_RANGE = (55.0, 277_000.0)  # Sec. III-A
PAPER_HOURS = [float(f"{55.0 * (277_000.0 / 55.0) ** (i / 10):.3g}") for i in range(11)]
PAPER_MASK_GRID_HOURS = 5_333.0  # Sec. IV-B: en768-12 "trained on 5333 hours of audio"
PAPER_SIZE_COMPUTE_HOURS = 10_666.0  # Sec. IV-D and IV-E: "10,666 hours of audio data"
# Halvings below the default corpus (3 h); prep takes nested seeded subsets.
CPU_HOURS = [0.1875, 0.375, 0.75, 1.5, 3.0]
# Sec. III-B / App. B: steps "from 2,000 to 746,000"; the paper gives only the ends. Ours: doublings
# from 2,000, then the full 746,000 (Table III's RankMe steps are logged inside each run instead).
PAPER_STEPS_RANGE = (2_000, 746_000)  # Sec. III-B, App. B
PAPER_STEPS = [2_000 * 2**i for i in range(9)] + [746_000]
CPU_STEPS = [25, 50, 100, 200]


def _mask_ratio_points(profile: str) -> list[GridPoint]:
    ratios = [round(0.30 + 0.05 * i, 2) for i in range(14)] if profile == "paper" else [0.5, 0.6, 0.7, 0.8, 0.9]
    hours = PAPER_MASK_GRID_HOURS if profile == "paper" else None
    return [GridPoint(label=f"mask{r:.2f}", mask_ratio=r, base_hours=hours, coordinate=r) for r in ratios]


def _size_points(profile: str) -> list[GridPoint]:
    if profile == "paper":
        return [
            GridPoint(
                label=f"mae-en{w}-{d}",
                model_name=f"mae-en{w}-{d}",
                arch="mae",
                base_hours=PAPER_SIZE_COMPUTE_HOURS,
                coordinate=f"mae-en{w}-{d}",
            )  # fmt: skip
            for w, d in PAPER_SIZES
        ]
    return [
        GridPoint(
            label=f"w{w}d{d}",
            model_name="mae-debug",
            arch="mae",
            model_overrides={"encoder_dim": w, "encoder_depth": d, "encoder_heads": w // 16},
            coordinate=f"w{w}d{d}",
        )
        for w, d in CPU_SIZES
    ]


def _data_volume_points(profile: str) -> list[GridPoint]:
    hours = PAPER_HOURS if profile == "paper" else CPU_HOURS
    return [GridPoint(label=f"h{h:g}", max_hours=h, coordinate=h) for h in hours]


def _compute_points(profile: str) -> list[GridPoint]:
    """Training steps; combine with `size` (--grid size,compute) for the Q(C) frontier."""
    steps = PAPER_STEPS if profile == "paper" else CPU_STEPS
    hours = PAPER_SIZE_COMPUTE_HOURS if profile == "paper" else None
    return [GridPoint(label=f"s{s}", train_steps=s, base_hours=hours, coordinate=s) for s in steps]


def _arch_points(profile: str) -> list[GridPoint]:
    """The study's Sec. IV-G architectures (sweeps.study.arch_grid) plus our own masked-modelling families."""
    return [
        GridPoint(
            label=point.label,
            model_name=point.model_name,
            arch=point.arch,
            model_overrides=dict(point.overrides),
            coordinate=point.label,
            scale=point.scale,
            train_steps=_own_steps(point.model_name) if profile == "paper" else None,
        )
        for point in architecture_points(profile)
    ]


def _own_steps(model_name: str) -> int | None:
    """An architecture's own training length (its paper's recipe); None: the study's 746,000."""
    recipe = architecture_recipe(model_name)
    return recipe.train_steps if recipe else None


GRIDS = {
    "mask_ratio": _mask_ratio_points,
    "size": _size_points,
    "data_volume": _data_volume_points,
    "compute": _compute_points,
    "arch": _arch_points,
}


def grid_points(name: str, profile: str) -> list[GridPoint]:
    if name not in GRIDS:
        raise ValueError(f"unknown grid {name!r}; choose from {sorted(GRIDS)} (comma-separate to combine)")
    if profile not in PROFILES:
        raise ValueError(f"unknown profile {profile!r}; choose from {PROFILES}")
    return GRIDS[name](profile)


def parse_grid_names(text: str) -> list[str]:
    """'size,data_volume' -> ['size', 'data_volume'], checked."""
    names = [part.strip() for part in text.split(",") if part.strip()]
    if not names:
        raise ValueError("--grid is empty; name one or more of " + ", ".join(sorted(GRIDS)))
    if len(set(names)) != len(names):
        raise ValueError(f"--grid {text!r} names a grid twice")
    model_choosers = [n for n in names if n in ("size", "arch")]
    if len(model_choosers) > 1:
        raise ValueError("grids 'size' and 'arch' both choose the model and cannot be combined")
    for name in names:
        grid_points(name, "cpu_default")  # raises on an unknown name
    return names


def _merge(points: tuple[GridPoint, ...], names: list[str], base: BaseTrial) -> TrialSpec:
    overrides: dict[str, Any] = {}
    model_name, arch, train_steps = base.model_name, base.arch, base.train_steps
    mask_ratio, max_hours, scale = None, None, None
    base_hours = next((point.base_hours for point in points if point.base_hours is not None), None)
    for point in points:
        overrides.update(point.model_overrides)
        model_name = point.model_name or model_name
        arch = point.arch or arch
        mask_ratio = point.mask_ratio if point.mask_ratio is not None else mask_ratio
        max_hours = point.max_hours if point.max_hours is not None else max_hours
        train_steps = point.train_steps or train_steps
        scale = point.scale or scale
    if not any(point.model_name for point in points):  # the base model, not one a grid point names
        overrides = {**base.model_overrides, **overrides}
    return TrialSpec(
        name="_".join(point.label for point in points),
        model_name=model_name,
        arch=arch,
        model_overrides=overrides,
        mask_ratio=mask_ratio,
        max_hours=max_hours if max_hours is not None else base_hours,
        train_steps=train_steps,
        coordinates={name: point.coordinate for name, point in zip(names, points)},
        scale=scale,
    )


# The pretraining objective of a study's MAE trials: "mae" reconstructs log-mel patches (the paper's);
# "teacher" regresses an EMA teacher's targets (models/mae/teacher_targets.py: `t-` before the model name).
OBJECTIVES = ("mae", "teacher")
STUDY_MAE_PREFIX = "mae-"  # mae-en<width>-<depth> and mae-debug: the study MAE's registered names


def expand_grids(
    names: list[str] | str, *, profile: str = "cpu_default", objective: str = "mae", train_seeds: int = 1
) -> list[TrialSpec]:
    """Every trial of the Cartesian product of the named grids, in a deterministic order; each grid
    point `train_seeds` times (sweeps.study.grids.with_train_seeds)."""
    names = parse_grid_names(names) if isinstance(names, str) else parse_grid_names(",".join(names))
    axes = [grid_points(name, profile) for name in names]
    trials = [_merge(points, names, BASE_TRIALS[profile]) for points in itertools.product(*axes)]
    assert len({t.name for t in trials}) == len(trials), "grid labels must make unique trial names"
    return with_train_seeds([with_objective(trial, objective) for trial in trials], train_seeds)


TRAIN_SEED_SUFFIX = "-seed"


def with_train_seeds(trials: list[TrialSpec], train_seeds: int) -> list[TrialSpec]:
    """Each configuration trained `train_seeds` times: the first replicate keeps the configuration's
    name (a study run with one seed gains more on --resume), the others add `-seed<k>`; every
    trial's seed derives from its name (sweeps.study.trainable.trial_seed), and all replicates name the
    configuration, the bootstrap unit of the fits. One seed: the trials as they are."""
    if train_seeds < 1:
        raise ValueError(f"--train-seeds must be at least 1, got {train_seeds}")
    if train_seeds == 1:
        return trials
    return [
        dataclasses.replace(
            trial, name=trial.name if k == 0 else f"{trial.name}{TRAIN_SEED_SUFFIX}{k}", configuration=trial.name
        )
        for trial in trials
        for k in range(train_seeds)
    ]


def with_objective(trial: TrialSpec, objective: str) -> TrialSpec:
    """The trial trained with `objective`; the teacher objective exists for the study MAE only."""
    if objective not in OBJECTIVES:
        raise ValueError(f"--objective {objective!r}: choose one of {', '.join(OBJECTIVES)}")
    if objective == "mae":
        return trial
    if trial.arch != "mae" or not trial.model_name.startswith(STUDY_MAE_PREFIX):
        raise ValueError(
            f"--objective teacher trains the study MAE; trial {trial.name} is {trial.model_name} ({trial.arch}): "
            "use it with the mask_ratio, size, data_volume or compute grids, not arch"
        )
    return replace(trial, model_name=f"t-{trial.model_name}")
