"""`StudyConfig`: what one `python -m sweeps.scaling` study asks for, each setting declared once.

Every field carries its flag (pipeline.cli.flags), so `sweeps.scaling` generates its parser from
this class and a `--config FILE.toml` recipe sets the same fields by name: the study's own in a
`[study]` table, the pretraining and evaluation settings in `[pretrain]` and `[evaluate]` (the
sections, as torchtitan's job config groups its settings). A setting left None is the policy of
the profile's recipe (sweeps.protocol.recipe), resolved here and nowhere else.
"""

from __future__ import annotations

from dataclasses import dataclass

from pipeline.cli.flags import filled_by_program, flag, section
from pipeline.evaluate.baselines import BASELINES
from pipeline.evaluate.probes.scene import SCENE_PROBES
from sweeps.protocol.early_stop_rule import (
    DEFAULT_CHECK_FRACTION,
    DEFAULT_KEEP_FRACTION,
    DEFAULT_MIN_SAMPLES,
    validate_rule,
)
from sweeps.protocol.recipe import EVAL_CHECKPOINTS, RECIPES, eval_seeds_for
from sweeps.study.grids import GRIDS, OBJECTIVES, PROFILES

# The trial runner Ray workers import by name: pretrain, then evaluate.
REAL_TRIAL_RUNNER = "sweeps.study.trainable:run_pretrain_and_evaluate"
# The --config tables: the study's own fields, then one per section.
CONFIG_TABLES = "[study], [pretrain], [evaluate]"


@dataclass(frozen=True, kw_only=True)
class StudyPretraining:
    """Pretraining settings a study gives every trial; the rest is the profile's recipe and the grid point."""

    # The profile's recipe fixes the paper's batch (256); the CPU default keeps the pipeline's.
    global_batch_size: int = flag(
        "--batch-size", 32, "global batch of each trial where the profile's recipe leaves it open (cpu_default)"
    )

    def __post_init__(self) -> None:
        if self.global_batch_size < 1:
            raise ValueError(f"--batch-size must be at least 1, got {self.global_batch_size}")


@dataclass(frozen=True, kw_only=True)
class StudyEvaluation:
    """How every trial is scored; None: the profile recipe's policy (`StudyConfig.resolved_*`)."""

    probe: str | None = flag(
        "--probe", None,
        "scene probe that scores every trial (see python -m pipeline.evaluate --help); recorded on the study "
        "run, and Q compares only within one probe (default: the profile's: knn for cpu_default, appc for paper)",
        choices=list(SCENE_PROBES),
    )  # fmt: skip
    eval_checkpoints: str | None = flag(
        "--eval-checkpoints", None,
        "checkpoints each trial evaluates: all (initialisation, Table III's RankMe steps, the last: Q(R) "
        "over checkpoints as the paper's Fig. 1a) or final (default: the profile's, all for cpu_default)",
        choices=list(EVAL_CHECKPOINTS),
    )  # fmt: skip
    seeds: int | None = flag(
        "--seeds", None,
        "probe repetitions per task (default: the profile's: 1 for the deterministic linear and knn probes, "
        "else 2 for cpu_default and 3 for paper)",
    )  # fmt: skip

    baselines: str | None = flag(
        "--baselines", None,
        "reference points measured on the study's tasks with its probe before the trials, comma-separated: "
        "naive (log-mel statistics), initialisation (the first trial's model, random weights), control (that "
        "model trained supervised on the tasks: Q's headroom), or none (default: the profile's: all three for "
        "cpu_default, naive for paper)",
    )  # fmt: skip
    control_steps: int | None = flag(
        "--control-steps", None, "supervised steps of the positive control (default: the profile's, 4000)"
    )
    accept_task_set: bool = flag(
        "--accept-task-set", False,
        "run a profile that declares a task set (paper: the 16 HEAR scene tasks of Sec. III-D) on a task folder "
        "that differs; without it the study refuses before training. The difference is recorded on the study run",
    )  # fmt: skip

    def __post_init__(self) -> None:
        if self.seeds is not None and self.seeds < 1:
            raise ValueError(f"--seeds must be at least 1, got {self.seeds}")
        if self.control_steps is not None and self.control_steps < 1:
            raise ValueError(f"--control-steps must be at least 1, got {self.control_steps}")
        unknown = sorted(set(self.baseline_names or ()) - set(BASELINES))
        if unknown:
            raise ValueError(f"--baselines: unknown {unknown}; choose from {', '.join(BASELINES)}, or none")

    @property
    def baseline_names(self) -> tuple[str, ...] | None:
        """The names --baselines gives (() for none); None: the profile's."""
        if self.baselines is None:
            return None
        names = tuple(name.strip() for name in self.baselines.split(",") if name.strip())
        return () if names == ("none",) else names


@dataclass(frozen=True, kw_only=True)
class StudyConfig:
    grid: str = flag("--grid", None, f"one of {sorted(GRIDS)}, or several comma-separated", required=True)
    profile: str = flag("--profile", "cpu_default", "grid values and training recipe", choices=PROFILES)
    objective: str = flag(
        "--objective", "mae",
        "pretraining objective of the study MAE: mae (log-mel reconstruction, the paper's) or teacher "
        "(an EMA teacher's targets, data2vec 2.0 / EAT: the t-mae-* models)",
        choices=list(OBJECTIVES),
    )  # fmt: skip
    train_seeds: int = flag(
        "--train-seeds", 1,
        "train every grid point this many times with different seeds (trials <point>, <point>-seed1, ...): the "
        "fits resample configurations with their seeds together and the report shows the seed-to-seed spread",
    )  # fmt: skip
    study_name: str | None = flag("--study", None, "study name (default: <grid>-<profile>)")
    resume: bool = flag("--resume", False, "continue a study: finished trials are not re-run")

    # Where it reads and writes; None: the embedded defaults (pipeline.storage.paths).
    tracking_uri: str | None = flag("--tracking-uri", None, "MLflow store (default: the embedded SQLite file)")
    storage_path: str | None = flag("--storage-path", None, "Ray run storage (shared storage on clusters)")
    corpus_dir: str | None = flag(
        "--corpus", None, "pretraining audio (default: the embedded corpus, built if missing)"
    )
    shards_root: str | None = flag(
        "--shards", None,
        "root of the study's shard sets, a folder or a bucket URI (s3://BUCKET/PATH?endpoint_override=HOST:PORT"
        "&scheme=http): each front end and hour budget reads <root>/<preset>[-h<hours>]. Given without --corpus, "
        "shard sets already there are used as they are; missing ones are built there from the corpus "
        "(default: the embedded shards folder)",
    )  # fmt: skip
    tasks_dir: str | None = flag("--tasks", None, "HEAR task directory (default: the embedded tasks, built if missing)")

    # How the trials run.
    gpus_per_trial: float = flag("--gpus-per-trial", 0.0, "GPUs of each trial's Train worker (0: CPU training)")
    cpus_per_trial: float = flag("--cpus-per-trial", 0.5, "for the trial driver process itself")
    max_concurrent: int | None = flag(
        "--max-concurrent", None, "trials at once (default: one per CPU of the cluster, as resources allow)"
    )
    address: str | None = flag("--address", None, "Ray cluster address (default: start a local Ray)")
    runner: str = filled_by_program(REAL_TRIAL_RUNNER)  # "module:function" taking (TrialSpec, StudyContext, child run)
    prepare_shards: bool = filled_by_program(True)  # build the corpus, tasks and shard sets the trials need first

    quiet: bool = flag("--quiet", False, "no progress lines while the study runs")

    # The analysis and RankMe early stopping (sweeps.protocol.early_stop_rule).
    n_bootstrap: int = flag("--n-bootstrap", 200, "bootstrap resamples per law")
    rankme_early_stop: bool = flag(
        "--rankme-early-stop", False,
        "stop a trial whose RankMe at --check-fraction of its steps is not in the top --keep-fraction so far "
        "(the first --min-samples - 1 trials to get there always continue). {early_stop_saving}",
    )  # fmt: skip
    early_stop_keep_fraction: float = flag(
        "--keep-fraction", DEFAULT_KEEP_FRACTION, "share of trials kept at the decision step, rounded up"
    )
    early_stop_check_fraction: float = flag(
        "--check-fraction",
        DEFAULT_CHECK_FRACTION,
        "decide at the first RankMe step at or after this share of a trial's steps",
    )
    early_stop_min_samples: int = flag(
        "--min-samples", DEFAULT_MIN_SAMPLES, "trials that must reach the decision step before any is stopped"
    )

    pretrain: StudyPretraining = section(StudyPretraining)
    evaluate: StudyEvaluation = section(StudyEvaluation)

    def __post_init__(self) -> None:
        if not self.grid:
            raise ValueError("a study needs a grid: --grid NAME (or grid in the --config file's [study] table)")
        # Checked before any trial runs: the report replays the rule even without the live scheduler.
        validate_rule(keep_fraction=self.early_stop_keep_fraction, check_fraction=self.early_stop_check_fraction)
        if self.max_concurrent is not None and self.max_concurrent < 1:
            raise ValueError(f"--max-concurrent must be at least 1 trial at once, got {self.max_concurrent}")
        if self.cpus_per_trial < 0 or self.gpus_per_trial < 0 or self.n_bootstrap < 0:
            raise ValueError(
                f"--cpus-per-trial, --gpus-per-trial and --n-bootstrap must not be negative; got "
                f"{self.cpus_per_trial}, {self.gpus_per_trial}, {self.n_bootstrap}"
            )
        if self.train_seeds < 1:
            raise ValueError(f"--train-seeds must be at least 1, got {self.train_seeds}")
        if self.profile not in RECIPES:
            raise ValueError(f"unknown profile {self.profile!r}; choose one of {', '.join(RECIPES)}")

    @property
    def resolved_probe(self) -> str:
        probe = self.evaluate.probe or RECIPES[self.profile].probe
        if probe not in SCENE_PROBES:
            raise ValueError(f"unknown probe {probe!r}; choose one of {', '.join(SCENE_PROBES)}")
        return probe

    @property
    def resolved_eval_checkpoints(self) -> str:
        return self.evaluate.eval_checkpoints or RECIPES[self.profile].eval_checkpoints

    @property
    def resolved_eval_seeds(self) -> int:
        return self.evaluate.seeds or eval_seeds_for(self.profile, self.resolved_probe)

    @property
    def resolved_baselines(self) -> tuple[str, ...]:
        names = self.evaluate.baseline_names
        return RECIPES[self.profile].baselines if names is None else names

    @property
    def resolved_control_steps(self) -> int:
        return self.evaluate.control_steps or RECIPES[self.profile].control_steps

    @property
    def resolved_study_name(self) -> str:
        return self.study_name or f"{self.grid.replace(',', '+')}-{self.profile}"
