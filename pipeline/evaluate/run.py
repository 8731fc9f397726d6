"""Evaluate a pretrained checkpoint: RankMe R and probe quality Q on labeled HEAR tasks.

`evaluate_checkpoint(checkpoint_dir, tasks_dir=...)` measures RankMe R on the checkpoint's RankMe pool
(pretraining-domain crops, the pool its training measured on: pipeline.evaluate.checkpoint_rankme),
embeds every task's clips once with the frozen model (their RankMe on a seeded sample of
`task_rankme_n` is kept as the diagnostic `task_rankme`: it partly measures how separable the
labeled audio is), trains one scene probe per task and seed (the HEAR MLP grid under a named
schedule, or the linear or kNN probe: pipeline.evaluate.probes.scene.SCENE_PROBES), and aggregates
(pipeline.evaluate.scores). With `lid_probe` (MLP schedules only), language-ID tasks are scored
instead by the attentive LID head on frame embeddings (pipeline.evaluate.probes.lid); each task
score names its probe, and `q_probe` the probes behind Q: compare Q only between results with the
same `q_probe`.
`log_evaluation` writes the result to MLflow; `write_results` to CSV and JSON.
CLI: `python -m pipeline.evaluate --help`.
"""

from __future__ import annotations

import csv
import json
import time
import warnings
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from pipeline.evaluate.checkpoint_rankme import checkpoint_pool_rankme
from pipeline.evaluate.probes.grid import ProbeTrainingConfig
from pipeline.evaluate.probes.lid import LidProbeConfig
from pipeline.evaluate.probes.scene import DEFAULT_SEEDS, SceneProbe
from pipeline.evaluate.readout_calibration import DEFAULT_READOUT_STATS
from pipeline.evaluate.scores import (
    TaskScore,
    quality_q,
    quality_q_interval,
    quality_q_replicates,
    quality_q_test_interval,
)
from pipeline.evaluate.task_jobs import (
    TaskEvaluation,
    TaskJob,
    evaluate_tasks,
    load_embedder,
)
from pipeline.rankme.effective_rank import rankme_with_shape, sample_fixed_n
from pipeline.rankme.pool import MIN_SAMPLES_PER_FEATURE
from pipeline.task_format.reader import TaskInfo, read_checked_tasks
from pipeline.tracking.keys import INTERVAL_OVER_SEEDS, INTERVAL_OVER_TEST_CLIPS, READOUT_AND_INPUT_KEYS

# The task-audio diagnostic's N (not the R of the fits): the default task set holds ~7,000 clips,
# so 4,096 fits it with room to spare.
DEFAULT_TASK_RANKME_N = 4096
RANKME_SEED = 0


@dataclass(kw_only=True)
class EvaluationResult:
    checkpoint_dir: str
    model_name: str
    step: int
    rankme: float  # on the RankMe pool: the R of the fits
    rankme_n: int
    rankme_k: int
    rankme_pool: str  # the pool's fingerprint
    rankme_capped: bool  # N < 8 K
    task_rankme: float  # diagnostic: on the labeled tasks' scene embeddings
    task_rankme_n: int
    task_scores: dict[str, dict]  # task -> {"mean", "ci_low", "ci_high", "metric", "seed_scores", "probe"}
    q: float
    seeds: int
    probe_protocol: dict = field(default_factory=dict)  # the scene probe's config as a dict ("schedule": its name)
    q_probe: str = ""  # the probes behind Q, e.g. "linear" or "lid-agent+mlp-hear": Q compares only within one
    lid_probe: dict | None = None  # LidProbeConfig as a dict when language-ID tasks used the LID head
    seconds: dict[str, float] = field(default_factory=dict)  # "embed", "probe" per task, "total"
    run_id: str | None = None
    hear_module: str = ""  # set when an outside HEAR module was scored (checkpoint_dir: its model file)
    # Q on each test-clip bootstrap resample (deterministic probes), the same resamples for every model
    # scored on these tasks: two results' replicates pair (pipeline.evaluate.scores.paired_interval).
    q_replicates: tuple[float, ...] = ()
    # How running statistics were read out: "calibrated" (re-estimated on the study's calibration crops),
    # "recorded" (as saved) or "none" (the model has none): pipeline.evaluate.readout_calibration.
    readout_stats: str = "none"
    # The calibration set behind a "calibrated" readout (pipeline.evaluate.readout_calibration.Readout).
    readout_calibration_pool: str = ""
    readout_calibration_crops: int = 0
    # The model's input normalisation (pipeline.evaluate.embeddings.MelNormalisation.record): "per-clip",
    # "dataset" (with where its statistics were read and their digest), or a per-clip substitute.
    input_normalisation: str = ""
    input_stats_from: str = ""
    input_stats_sha256: str = ""

    def to_dict(self) -> dict:
        return asdict(self)


def evaluate_checkpoint(
    checkpoint_dir: str | Path, *, tasks_dir: str | Path, task_names: list[str] | None = None,
    rankme_shards: str | None = None, rankme_n: int | None = None, task_rankme_n: int = DEFAULT_TASK_RANKME_N,
    seeds: int = DEFAULT_SEEDS, probe_training: SceneProbe = ProbeTrainingConfig(),
    lid_probe: LidProbeConfig | None = None, device: str = "cpu", progress: Callable[[str], None] | None = None,
    workers: int = 1, readout_stats: str = DEFAULT_READOUT_STATS, checked_tasks: list[TaskInfo] | None = None,
) -> EvaluationResult:  # fmt: skip
    """RankMe (on the RankMe pool; `rankme_shards` / `rankme_n` override the checkpoint's) and probe
    scores of one checkpoint on the HEAR tasks under `tasks_dir`.

    `probe_training` is the scene probe: an MLP schedule, a linear or a kNN config (scene_probe names them).
    `lid_probe`, when given, scores the language-ID tasks (TaskInfo.is_language_id) with the LID
    head on frame embeddings; every other task keeps the MLP. It goes with an MLP schedule only:
    the linear and kNN probes score every task, language-ID ones too, on scene embeddings.
    `progress` receives one line per finished task (e.g. `print`). `workers` > 1 scores the tasks in that
    many one-thread processes (pipeline.evaluate.task_jobs): the same numbers, sooner on several cores.
    `readout_stats`: how running statistics are read out (pipeline.evaluate.readout_calibration); R and
    every task are read out the same way. `checked_tasks`: read_checked_tasks' result, reused by a caller."""
    started = time.perf_counter()
    tasks = checked_tasks if checked_tasks is not None else read_checked_tasks(tasks_dir, task_names)
    _check_lid_probe(lid_probe, probe_training, tasks)
    tick = time.perf_counter()
    embedder, meta = load_embedder(checkpoint_dir, device, readout_stats=readout_stats, rankme_shards=rankme_shards)
    pool_value = checkpoint_pool_rankme(embedder, meta, rankme_shards=rankme_shards, rankme_n=rankme_n)
    seconds_rankme = time.perf_counter() - tick

    def job(task) -> TaskJob:
        return TaskJob(
            checkpoint_dir=str(checkpoint_dir), task_dir=str(task.directory), seeds=seeds,
            probe_training=probe_training, lid_probe=lid_probe, device=device, readout_stats=readout_stats,
            rankme_shards=rankme_shards,
        )  # fmt: skip

    finished, seconds = _score_tasks(evaluate_tasks(tasks, job, embedder=embedder, workers=workers), progress)
    # Task order, not finishing order: the RankMe sample must not depend on which worker was faster.
    task_scores: dict[str, TaskScore] = {task.name: finished[task.name].score for task in tasks}
    all_features = [finished[task.name].features for task in tasks]
    task_value = task_audio_rankme(np.concatenate(all_features), task_rankme_n)
    seconds.update(rankme_pool=seconds_rankme, total=time.perf_counter() - started)
    return EvaluationResult(
        checkpoint_dir=str(Path(checkpoint_dir).resolve()),
        model_name=str(meta.get("model_name")),
        step=int(meta.get("step", 0)),
        rankme=pool_value.value,
        rankme_n=pool_value.n,
        rankme_k=pool_value.k,
        rankme_pool=pool_value.pool,
        rankme_capped=pool_value.capped,
        task_rankme=task_value.value,
        task_rankme_n=task_value.n_samples,
        task_scores={name: score.to_dict() for name, score in task_scores.items()},
        q=quality_q({name: score.mean for name, score in task_scores.items()}),
        seeds=seeds,
        probe_protocol=asdict(probe_training),
        q_probe="+".join(sorted({score.probe for score in task_scores.values()})),
        lid_probe=asdict(lid_probe) if lid_probe is not None else None,
        seconds=seconds,
        q_replicates=quality_q_replicates([finished[task.name].test_replicates for task in tasks]),
        **{key: meta[key] for key in READOUT_AND_INPUT_KEYS},
    )


def _check_lid_probe(lid_probe: LidProbeConfig | None, probe_training: SceneProbe, tasks: list[TaskInfo]) -> None:
    if lid_probe is None:
        return
    if not isinstance(probe_training, ProbeTrainingConfig):
        raise ValueError(f"a LID head goes with an MLP schedule (hear, quick), not the {probe_training.schedule} probe")
    _warn_if_no_language_id_task(lid_probe, tasks)


def _warn_if_no_language_id_task(lid_probe: LidProbeConfig, tasks: list[TaskInfo]) -> None:
    if not any(task.is_language_id for task in tasks):
        warnings.warn(
            f"a LID head ({lid_probe.attention}) was asked for but none of the tasks {[t.name for t in tasks]} is marked "
            "language-ID ('label_kind': 'language' in task_metadata.json; tasks built by older code lack it: add "
            "it, or delete the tasks directory and rebuild it with `python -m pipeline.corpus tasks`); every task uses the MLP",
            stacklevel=3,
        )


def _score_tasks(
    evaluations: Iterable[TaskEvaluation], progress: Callable[[str], None] | None
) -> tuple[dict[str, TaskEvaluation], dict[str, float]]:
    """Each task's evaluation by name, and the seconds it spent embedding and probing; one progress
    line per task as it finishes."""
    finished: dict[str, TaskEvaluation] = {}
    seconds: dict[str, float] = {}
    for evaluation in evaluations:
        finished[evaluation.task] = evaluation
        seconds[f"embed/{evaluation.task}"] = evaluation.embed_seconds
        seconds[f"probe/{evaluation.task}"] = evaluation.probe_seconds
        if progress is not None:
            score = evaluation.score
            progress(
                f"[evaluate] {evaluation.task}: {score.metric} {score.mean:.3f} by {score.probe} "
                f"(embed {evaluation.embed_seconds:.1f} s, probe {evaluation.probe_seconds:.1f} s)"
            )
    return finished, seconds


def task_audio_rankme(features: np.ndarray, rankme_n: int):
    """The diagnostic task-audio RankMe: a seeded sample of `rankme_n` task clips' scene embeddings."""
    if len(features) < rankme_n:
        warnings.warn(
            f"task RankMe asked for N={rankme_n} but the tasks hold {len(features)} clips; using all "
            f"{len(features)} (recorded as task_rankme_n). Compare only values with the same N.",
            stacklevel=3,
        )
        rankme_n = len(features)
    return rankme_with_shape(sample_fixed_n(features, n_samples=rankme_n, seed=RANKME_SEED))


# probe: e.g. "mlp-hear", "lid-agent"; interval_over: what the 95% interval resamples ("probe seeds",
# or "test clips" for the deterministic linear / kNN probes; "" where there is none).
RESULT_COLUMNS = ["task", "metric", "mean", "ci_low", "ci_high", "interval_over", "probe"]


def _interval(low: float, high: float, test_low: float, test_high: float) -> dict:
    if np.isfinite(low) and np.isfinite(high):
        return {"ci_low": low, "ci_high": high, "interval_over": INTERVAL_OVER_SEEDS}
    if np.isfinite(test_low) and np.isfinite(test_high):
        return {"ci_low": test_low, "ci_high": test_high, "interval_over": INTERVAL_OVER_TEST_CLIPS}
    return {"ci_low": np.nan, "ci_high": np.nan, "interval_over": ""}


def results_rows(result: EvaluationResult) -> list[dict]:
    """One row per task plus a summary row: the results table of the CSV and the console."""
    nan = float("nan")
    rows = [
        {
            "task": task,
            "metric": score["metric"],
            "mean": score["mean"],
            **_interval(
                score["ci_low"], score["ci_high"], score.get("test_ci_low", nan), score.get("test_ci_high", nan)
            ),
            "probe": score.get("probe", ""),
        }
        for task, score in result.task_scores.items()
    ]
    rows.append(
        {
            "task": "Q (mean)",
            "metric": "primary",
            "mean": result.q,
            **_interval(*quality_q_interval(result.task_scores), *quality_q_test_interval(result.task_scores)),
            "probe": "",
        }
    )
    return rows


def write_results(result: EvaluationResult, output_dir: str | Path) -> tuple[Path, Path]:
    """`evaluation.json` (everything) and `evaluation.csv` (per-task table) in `output_dir`."""
    directory = Path(output_dir)
    directory.mkdir(parents=True, exist_ok=True)
    json_path = directory / "evaluation.json"
    json_path.write_text(json.dumps(result.to_dict(), indent=2, sort_keys=True))
    csv_path = directory / "evaluation.csv"
    with csv_path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=RESULT_COLUMNS)
        writer.writeheader()
        writer.writerows(results_rows(result))
    return json_path, csv_path


def describe_reading(result: EvaluationResult) -> str:
    """One line saying how the checkpoint was read: compare Q only between results where it agrees."""
    readout = result.readout_stats
    if readout == "calibrated":
        readout += f" on {result.readout_calibration_crops} crops (pool {result.readout_calibration_pool})"
    inputs = result.input_normalisation or "?"
    if inputs == "dataset":
        inputs = f"dataset mean/std from {result.input_stats_from} ({result.input_stats_sha256})"
    return f"read out: running statistics {readout}; input normalisation {inputs}"


def format_table(result: EvaluationResult) -> str:
    """A readable console table: per-task score with its 95% CI, Q and RankMe with N and K."""
    scored = (
        f"HEAR module {result.hear_module} (model file {result.checkpoint_dir or 'none'})"
        if result.hear_module
        else f"checkpoint {result.checkpoint_dir} ({result.model_name}, step {result.step})"
    )
    lines = [
        f"{scored}, {result.seeds} seeds, probe {result.probe_protocol.get('schedule', '?')}",
        f"{'task':<28}{'metric':<12}{'score':>8}   {'probe':<14}95% CI (over)",
    ]
    for row in results_rows(result):
        interval = (
            "" if np.isnan(row["ci_low"]) else f"[{row['ci_low']:.3f}, {row['ci_high']:.3f}] ({row['interval_over']})"
        )
        lines.append(f"{row['task']:<28}{row['metric']:<12}{row['mean']:>8.3f}   {row['probe']:<14}{interval}")
    capped = f", capped: N < {MIN_SAMPLES_PER_FEATURE} K" if result.rankme_capped else ""
    lines.append(
        f"RankMe {result.rankme:.2f} (N={result.rankme_n}, K={result.rankme_k}, pool {result.rankme_pool}{capped})"
    )
    lines.append(f"task-audio RankMe {result.task_rankme:.2f} (N={result.task_rankme_n}, diagnostic)")
    if not result.hear_module:
        lines.append(describe_reading(result))
    lines.append(f"took {result.seconds.get('total', float('nan')):.1f} s")
    return "\n".join(lines)
