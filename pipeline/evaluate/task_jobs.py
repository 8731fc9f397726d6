"""One task's evaluation (embed its clips, train its probes), run here or in worker processes.

A task's result depends only on the checkpoint, the task and the seeds: every probe run seeds its
own generators. So tasks can be scored in parallel processes and give the numbers a serial run
gives (tests/pipeline/evaluate/test_evaluate_workers.py). Probe training is small tensor work that a
second torch thread barely speeds up; processes of one thread each scale better (on 2 vCPUs only
1.17x over one process of 2 threads: `python benchmarks/bench_evaluate.py --compare-serial`).

Workers are started with "spawn": forking a process that runs Ray (the study's trial actor) or
holds OpenMP threads is unsafe. Each worker loads the checkpoint once.
"""

from __future__ import annotations

import multiprocessing
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from pipeline.audio.frontend import get_preset
from pipeline.checkpoint import load_model_from_checkpoint
from pipeline.evaluate.embeddings import FrameEmbedder, normalisation_for
from pipeline.evaluate.probes.lid import LidProbeConfig, probe_task_lid
from pipeline.evaluate.probes.scene import SceneProbe, probe_task
from pipeline.evaluate.probes.seeds import fold_test_replicates
from pipeline.evaluate.rankme_shards_fit import check_rankme_shards_fit
from pipeline.evaluate.readout_calibration import DEFAULT_READOUT_STATS, calibrate_checkpoint
from pipeline.evaluate.scores import TaskScore
from pipeline.evaluate.task_embeddings import embed_task
from pipeline.task_format.reader import TaskInfo, probe_splits, read_split_labels


@dataclass(frozen=True, kw_only=True)
class TaskEvaluation:
    task: str
    score: TaskScore
    features: np.ndarray  # every clip's scene embedding (n_clips, dim), all splits: RankMe's input
    embed_seconds: float
    probe_seconds: float
    # The score on each test-clip bootstrap resample (deterministic probes; the same resamples for
    # every model scored on this task: pipeline.evaluate.probes.bootstrap); None otherwise.
    test_replicates: np.ndarray | None = None


@dataclass(frozen=True, kw_only=True)
class TaskJob:
    """Everything a worker needs to score one task (plain values: it is pickled to the worker)."""

    checkpoint_dir: str
    task_dir: str
    seeds: int
    probe_training: SceneProbe  # the scene probe: an MLP schedule, linear or kNN
    lid_probe: LidProbeConfig | None
    device: str
    readout_stats: str = DEFAULT_READOUT_STATS  # pipeline.evaluate.readout_calibration
    rankme_shards: str | None = None  # the calibration crops' shards when not the checkpoint's own


_EMBEDDERS: dict[tuple, FrameEmbedder] = {}  # per process: (checkpoint, device, readout) -> embedder


def load_embedder(
    checkpoint_dir: str | Path,
    device: str,
    *,
    readout_stats: str = DEFAULT_READOUT_STATS,
    rankme_shards: str | None = None,
) -> tuple[FrameEmbedder, dict]:
    """The checkpoint's frozen model, ready to read out (its running statistics re-estimated unless
    `readout_stats` is "recorded"), and its model.json with the readout it got and its input normalisation
    added (`Readout.record`, `MelNormalisation.record`)."""
    model, meta = load_model_from_checkpoint(checkpoint_dir, device=device)
    if rankme_shards:  # before the readout calibrates on them and the pool is measured on them
        check_rankme_shards_fit(rankme_shards, model.spec)
    readout = calibrate_checkpoint(model, meta, device=device, readout_stats=readout_stats, rankme_shards=rankme_shards)
    normalisation = normalisation_for(get_preset(model.spec.frontend_preset), meta)
    # What the scores must record to be compared: the readout and the input normalisation it got.
    meta = {**meta, **readout.record(), **normalisation.record()}
    return FrameEmbedder(model, normalisation=normalisation, device=device), meta


def evaluate_task(task: TaskInfo, embedder: FrameEmbedder, job: TaskJob) -> TaskEvaluation:
    """Embed one task with the frozen model, then score it with its probe."""
    tick = time.perf_counter()
    uses_lid_head = job.lid_probe is not None and task.is_language_id
    embeddings = embed_task(task, embedder, keep_frames=uses_lid_head)
    embed_seconds = time.perf_counter() - tick
    tick = time.perf_counter()
    replicates = None
    if uses_lid_head:
        score, _ = probe_task_lid(task, embeddings.frames, seeds=job.seeds, config=job.lid_probe)
    else:
        score, results = probe_task(task, embeddings.splits, seeds=job.seeds, training=job.probe_training)
        replicates = fold_test_replicates(results[: len(probe_splits(task))])  # the first seed's folds
    return TaskEvaluation(
        task=task.name,
        score=score,
        features=embeddings.all_features(),
        embed_seconds=embed_seconds,
        probe_seconds=time.perf_counter() - tick,
        test_replicates=replicates,
    )


def _evaluate_in_worker(job: TaskJob) -> TaskEvaluation:
    from pipeline.task_format.reader import read_task_info

    key = (job.checkpoint_dir, job.device, job.readout_stats, job.rankme_shards)
    if key not in _EMBEDDERS:
        _EMBEDDERS[key] = load_embedder(
            job.checkpoint_dir, job.device, readout_stats=job.readout_stats, rankme_shards=job.rankme_shards
        )[0]
    return evaluate_task(read_task_info(job.task_dir), _EMBEDDERS[key], job)


def _one_thread() -> None:
    torch.set_num_threads(1)


def _clip_count(task: TaskInfo) -> int:
    return sum(len(read_split_labels(task, split)) for split in task.splits)


def evaluate_tasks(
    tasks: list[TaskInfo],
    job: Callable[[TaskInfo], TaskJob],
    *,
    embedder: FrameEmbedder,
    workers: int,
) -> Iterator[TaskEvaluation]:
    """Each task's evaluation as it finishes: here with `embedder` (workers=1), else in `workers`
    processes of one thread each, the largest tasks first so none is left running alone at the end."""
    if workers < 1:
        raise ValueError(f"workers must be at least 1, got {workers}")
    if workers == 1 or len(tasks) < 2:
        for task in tasks:
            yield evaluate_task(task, embedder, job(task))
        return
    by_size = sorted(tasks, key=_clip_count, reverse=True)
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=min(workers, len(tasks)), mp_context=context, initializer=_one_thread) as pool:
        futures = [pool.submit(_evaluate_in_worker, job(task)) for task in by_size]
        for future in as_completed(futures):
            yield future.result()
