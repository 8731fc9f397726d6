"""`EvaluateConfig`: every setting of `python -m pipeline.evaluate`, each declared once with its flag.

The parser is generated from the fields (pipeline.cli.flags), so the flag, default and help of a
setting live here and nowhere else; `python -m sweeps.external` reuses the same parser and config.
The scene probe's help describes the schedules from their own configs, so it cannot drift from them.
"""

from __future__ import annotations

import dataclasses

from models.heads.frame_attention import ATTENTION_KINDS
from pipeline.cli.errors import UserError
from pipeline.cli.flags import flag
from pipeline.evaluate.probes.grid import PROBE_SCHEDULES, ProbeTrainingConfig, full_grid
from pipeline.evaluate.probes.knn import KnnProbeConfig
from pipeline.evaluate.probes.lid import LidProbeConfig
from pipeline.evaluate.probes.linear import LinearProbeConfig
from pipeline.evaluate.probes.scene import DEFAULT_SEEDS, SCENE_PROBES, SceneProbe, scene_probe
from pipeline.evaluate.run import DEFAULT_TASK_RANKME_N
from pipeline.rankme.pool import MIN_POOL_CROPS

NO_LID_HEAD = "none"


def _describe_schedule(config: ProbeTrainingConfig) -> str:
    layers = " or ".join(str(n) for n in config.hidden_layer_choices)
    return (
        f"{layers} hidden layer(s) of 1024, {config.grid_points} of {len(full_grid(config.hidden_layer_choices))} "
        f"grid points per seed, <= {config.max_epochs} epochs, patience {config.patience_checks} checks "
        f"of the validation {config.stop_on} every {config.validate_every_epochs} epoch(s)"
    )


def _probe_help() -> str:
    linear, knn = LinearProbeConfig(), KnnProbeConfig()
    return (
        f"scene probe. hear: HEAR 2021's predictor schedule ({_describe_schedule(PROBE_SCHEDULES['hear'])}), "
        "an MLP grid and what HEAR reports. appc: the RankMe study's probe, paper App. C "
        f"({_describe_schedule(PROBE_SCHEDULES['appc'])}), the paper profile's. quick: the same probe family, cut down "
        f"({_describe_schedule(PROBE_SCHEDULES['quick'])}); it exists because HEAR's schedule costs tens of "
        "minutes per checkpoint on 2 CPU cores, too slow to score every trial of a CPU study. "
        "linear: logistic regression on train-standardised embeddings (multinomial; one per class for multilabel "
        f"tasks), C in {list(linear.c_grid)} chosen on validation. knn: cosine kNN on train-standardised, "
        f"L2-normalised embeddings, {knn.vote} vote, k in {list(knn.k_grid)} chosen on validation. linear and knn "
        "are deterministic (every seed gives the same score) and score language-ID tasks on scene embeddings too. "
        "The name is recorded in the results and in MLflow (probe_schedule; each task's <task>/probe); "
        "compare Q only between results of the same probe"
    )


LID_HEAD_HELP = (
    "language-ID tasks only (task_metadata.json label_kind 'language': language_real, language_synthetic): "
    "score them with the model zoo's attentive-statistics-pooling head with this attention on frame embeddings "
    f"instead of the MLP on their mean (4 heads, width 64, dropout 0.2, Adam lr 1e-4, <= {LidProbeConfig().max_epochs} "
    "epochs with early stopping on validation accuracy); none: the MLP everywhere. MLP probes (hear, appc, quick) only"
)


@dataclasses.dataclass(frozen=True, kw_only=True)
class EvaluateConfig:
    # What is scored: exactly one of these three.
    checkpoint: str | None = flag(
        "--checkpoint", None, "checkpoint directory (model.safetensors + model.json)", one_of="source"
    )
    run_id: str | None = flag(
        "--run-id", None, "MLflow id of a pretraining run: evaluates its newest checkpoint", one_of="source"
    )
    hear_module: str | None = flag(
        "--hear-module", None,
        "any module implementing the HEAR API (load_model, get_scene_embeddings): R on the RankMe pool as "
        "audio at its sample_rate, Q on the tasks (`python -m sweeps.external` places it on a study)",
        metavar="PKG.MODULE", one_of="source",
    )  # fmt: skip
    tasks: str = flag("--tasks", "all", "'all' or comma-separated task names")
    tasks_dir: str | None = flag("--tasks-dir", None, "HEAR tasks directory; None: $AUDIOSCALE_HOME/tasks")
    # RankMe R is measured on the RankMe pool (pretraining-domain crops); task-audio RankMe is a diagnostic.
    rankme_shards: str | None = flag(
        "--rankme-shards", None, "shards the RankMe pool is drawn from; None: the checkpoint's (its training's pool)"
    )
    rankme_n: int | None = flag(
        "--rankme-n", None, "crops in the RankMe pool; None: the checkpoint's (30000, or all its shards hold)"
    )
    task_rankme_n: int = flag(
        "--task-rankme-n", DEFAULT_TASK_RANKME_N, "task clips the diagnostic task-audio RankMe uses"
    )

    # How Q is measured: the scene probe, its repetitions and overrides, the language-ID head.
    seeds: int = flag("--seeds", DEFAULT_SEEDS, "probe repetitions per task (the papers use 10)")
    probe: str = flag("--probe", "hear", _probe_help(), choices=list(SCENE_PROBES))
    grid_points: int | None = flag(
        "--grid-points", None, "MLP override: probe configs sampled per seed; None: the schedule's"
    )
    max_epochs: int | None = flag("--max-epochs", None, "MLP override: probe epochs at most; None: the schedule's")
    patience: int | None = flag(
        "--patience", None, "MLP override: validation checks without improvement before stopping; None: the schedule's"
    )
    lid_head: str = flag("--lid-head", NO_LID_HEAD, LID_HEAD_HELP, choices=(NO_LID_HEAD, *ATTENTION_KINDS))

    # Where it runs and where the results go.
    tracking_uri: str | None = flag(
        "--tracking-uri", None, "MLflow tracking URI; None: $MLFLOW_TRACKING_URI or the embedded SQLite store"
    )
    output: str | None = flag(
        "--output", None, "where evaluation.json / evaluation.csv go; None: <checkpoint>/evaluation"
    )
    device: str = flag("--device", "cpu", "torch device for the embeddings")
    workers: int | None = flag(
        "--workers", None, "tasks scored at once, in processes of one thread each (same numbers as 1); "
        "default: the CPU cores, at most 4, on CPU; 1 on a GPU",
    )  # fmt: skip
    no_mlflow: bool = flag("--no-mlflow", False, "do not log to MLflow")

    # An outside model (--hear-module only; pipeline.interop.hear_module_cli).
    model_file: str = flag(
        "--model-file", "", "--hear-module only: the path given to its load_model (weights file or folder)"
    )
    rankme_crop_frames: int | None = flag(
        "--rankme-crop-frames", None, "--hear-module only: RankMe pool crop length in the shards' mel frames (10 ms)"
    )

    def check_counts(self) -> None:
        """Refuse non-positive counts before any model is loaded (both CLIs that use this config call it)."""
        if self.seeds < 1:
            raise SystemExit(f"--seeds must be positive, got {self.seeds}")
        for name, value in (("--rankme-n", self.rankme_n), ("--task-rankme-n", self.task_rankme_n)):
            if value is not None and value < MIN_POOL_CROPS:
                raise SystemExit(
                    f"{name} must be at least {MIN_POOL_CROPS}, got {value}: the RankMe of one embedding is 1 "
                    "whatever the model (a pool under 8 x the embedding width is recorded as capped)"
                )
        if self.workers is not None and self.workers < 1:
            raise SystemExit("--workers must be positive")

    @property
    def task_names(self) -> list[str] | None:
        """None for every task; else the named ones (refused when the list names none)."""
        if self.tasks == "all":
            return None
        names = [name.strip() for name in self.tasks.split(",") if name.strip()]
        if not names:
            raise UserError(f"--tasks {self.tasks!r} names no task; give 'all' or comma-separated task names")
        return names


def probe_training_from(config: EvaluateConfig) -> SceneProbe:
    """The named probe with the explicit MLP overrides applied; bad overrides exit with a message."""
    schedule = scene_probe(config.probe)
    overrides = {
        field: value
        for field, value in (
            ("grid_points", config.grid_points),
            ("max_epochs", config.max_epochs),
            ("patience_checks", config.patience),
        )
        if value is not None
    }
    if not isinstance(schedule, ProbeTrainingConfig):
        if overrides or config.lid_head != NO_LID_HEAD:
            raise SystemExit(
                "--grid-points, --max-epochs, --patience and --lid-head go with the MLP probes (hear, appc, quick), "
                f"not {config.probe}"
            )
        return schedule
    if any(value < 1 for value in overrides.values()):
        raise SystemExit("--grid-points, --max-epochs and --patience must be positive")
    grid_size = len(full_grid(schedule.hidden_layer_choices))
    if overrides.get("grid_points", 1) > grid_size:
        raise SystemExit(
            f"--grid-points {overrides['grid_points']}: the {config.probe} schedule's grid has {grid_size} points"
        )
    return dataclasses.replace(schedule, **overrides)
