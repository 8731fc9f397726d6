"""`StudyConfig`: what one `python -m sweeps.scaling` study asks for; the CLI builds it at the edge."""

from __future__ import annotations

from dataclasses import dataclass

from pipeline.evaluate.probes.scene import SCENE_PROBES
from sweeps.protocol.early_stop_rule import (
    DEFAULT_CHECK_FRACTION,
    DEFAULT_KEEP_FRACTION,
    DEFAULT_MIN_SAMPLES,
    validate_rule,
)
from sweeps.protocol.recipe import default_eval_checkpoints

# The trial runner Ray workers import by name: pretrain, then evaluate.
REAL_TRIAL_RUNNER = "sweeps.study.trial:run_pretrain_and_evaluate"


@dataclass(frozen=True, kw_only=True)
class StudyConfig:
    grid: str  # one of sweeps.study.grids.GRIDS, or several comma-separated
    profile: str = "cpu_default"  # grid values: "paper" or "cpu_default"
    study_name: str | None = None  # the MLflow parent run; None: "<grid>-<profile>"
    resume: bool = False  # continue an existing study: finished trials are not re-run

    # Where it reads and writes; None: the embedded defaults (pipeline.paths).
    tracking_uri: str | None = None
    storage_path: str | None = None  # Ray run storage (shared storage on clusters)
    corpus_dir: str | None = None  # None: the embedded corpus, built if missing
    shards_root: str | None = None
    tasks_dir: str | None = None  # None: the embedded HEAR tasks, built if missing

    # How the trials run.
    gpus_per_trial: float = 0.0
    cpus_per_trial: float = 0.5  # for the trial driver process itself
    max_concurrent: int | None = None  # None: as the cluster's CPUs allow
    address: str | None = None  # Ray address; None: start a local Ray
    runner: str = REAL_TRIAL_RUNNER  # "module:function" taking (TrialSpec, StudyContext, child run)
    prepare_shards: bool = True  # build the corpus, tasks and shard sets the trials need first
    # The scene probe that scores every trial (pipeline.evaluate.probes.scene.SCENE_PROBES: hear |
    # quick | linear | knn); None: the profile's, HEAR's MLP grid for "paper", "knn" for "cpu_default".
    probe: str | None = None
    # Checkpoints each trial evaluates (sweeps.protocol.recipe.evaluation_steps_for): "all" or "final";
    # None: the profile's ("all" for cpu_default: its Q(R) points are checkpoints; "final" for paper).
    eval_checkpoints: str | None = None

    quiet: bool = False  # no progress lines (sweeps.study.progress) on stderr

    # The analysis and RankMe early stopping (sweeps.protocol.early_stop_rule).
    n_bootstrap: int = 200  # bootstrap resamples per law
    rankme_early_stop: bool = False
    early_stop_keep_fraction: float = DEFAULT_KEEP_FRACTION
    early_stop_check_fraction: float = DEFAULT_CHECK_FRACTION
    early_stop_min_samples: int = DEFAULT_MIN_SAMPLES

    def __post_init__(self) -> None:
        # Checked before any trial runs: the report replays the rule even without the live scheduler.
        validate_rule(keep_fraction=self.early_stop_keep_fraction, check_fraction=self.early_stop_check_fraction)
        if self.max_concurrent is not None and self.max_concurrent < 1:
            raise ValueError(f"--max-concurrent must be at least 1 trial at once, got {self.max_concurrent}")
        if self.cpus_per_trial < 0 or self.gpus_per_trial < 0 or self.n_bootstrap < 0:
            raise ValueError(
                f"--cpus-per-trial, --gpus-per-trial and --n-bootstrap must not be negative; got "
                f"{self.cpus_per_trial}, {self.gpus_per_trial}, {self.n_bootstrap}"
            )

    @property
    def resolved_probe(self) -> str:
        # The CPU default's kNN: deterministic (no seed noise) and ~1 s of probe time per checkpoint, so a
        # trial can score all its checkpoints (benchmarks/bench_probes.py); the paper's HEAR MLP otherwise.
        probe = self.probe or ("knn" if self.profile == "cpu_default" else "hear")
        if probe not in SCENE_PROBES:
            raise ValueError(f"unknown probe {probe!r}; choose one of {', '.join(SCENE_PROBES)}")
        return probe

    @property
    def resolved_eval_checkpoints(self) -> str:
        return self.eval_checkpoints or default_eval_checkpoints(self.profile)

    @property
    def resolved_study_name(self) -> str:
        return self.study_name or f"{self.grid.replace(',', '+')}-{self.profile}"
