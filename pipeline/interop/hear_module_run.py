"""Score any HEAR module like a study checkpoint: RankMe R on the study's pool, Q with the study's probe.

R: the module's scene embeddings of the RankMe pool as audio (pipeline.rankme.waveform_pool: the
same clips, segment offsets and crop duration our models embed as log-mel), then RankMe, with the
pool's N, K = scene_embedding_size, fingerprint and the N < 8 K flag, as `pipeline.rankme.model_rankme`
records them for our models.
Q: every task clip (16 kHz, as HEAR stores them) resampled to the module's rate, embedded with
`get_scene_embeddings` (the embedding the module's authors chose for scene tasks: that is the
HEAR convention, so no layer is picked here), and probed by the same scene probe, seeds and
aggregation as `evaluate_checkpoint` (pipeline.evaluate.probes.scene, pipeline.evaluate.scores).
The language-ID head needs frame embeddings and is not offered: language tasks use the scene probe.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict

import numpy as np
import torch
import torchaudio

from pipeline.evaluate.embedding_progress import EVERY_S, FIRST_LINE_AFTER_S, EmbeddingProgress
from pipeline.evaluate.probes.grid import ProbeTrainingConfig
from pipeline.evaluate.probes.scene import (
    DEFAULT_SEEDS,
    SceneProbe,
    probe_task,
    split_arrays,
)
from pipeline.evaluate.run import (
    DEFAULT_TASK_RANKME_N,
    EvaluationResult,
    task_audio_rankme,
)
from pipeline.evaluate.scores import TaskScore, quality_q
from pipeline.interop.hear_module import HearModule
from pipeline.rankme.model_rankme import PoolRankMe
from pipeline.rankme.pool import POOL_BATCH_CROPS, RankMePool
from pipeline.rankme.waveform_pool import pool_crop_waveforms
from pipeline.task_format.reader import (
    HEAR_SAMPLE_RATE_HZ,
    TaskInfo,
    check_task_files,
    encode_targets,
    list_task_dirs,
    probe_splits,
    read_split_labels,
    read_task_audio,
    read_task_info,
)


def hear_module_pool_rankme(
    hear: HearModule, pool: RankMePool | None, meter: EmbeddingProgress | None = None
) -> PoolRankMe:
    """RankMe of the module's scene embeddings of the pool's crops as audio; NaN without a pool.
    `meter` counts the crops as they are embedded."""
    if pool is None:
        return PoolRankMe(value=math.nan, n=0, k=hear.embedding_size, pool="", capped=True)
    on_call = None
    if meter is not None:
        meter.begin(f"the RankMe pool ({pool.n:,} crops)")
        on_call = meter.advance
    scene = [
        hear.scene_embeddings(batch, on_call=on_call)
        for batch in _batches(pool_crop_waveforms(pool, hear.sample_rate_hz))
    ]
    return PoolRankMe.of_embeddings(np.concatenate(scene), pool=pool.fingerprint)


def _batches(crops: Iterator[np.ndarray]) -> Iterator[list[np.ndarray]]:
    batch: list[np.ndarray] = []
    for crop in crops:
        batch.append(crop)
        if len(batch) == POOL_BATCH_CROPS:
            yield batch
            batch = []
    if batch:
        yield batch


def resample_from_hear_rate(wave: np.ndarray, sample_rate_hz: int) -> np.ndarray:
    """A 16 kHz task clip at the module's rate (torchaudio's windowed sinc, as prep resamples)."""
    if sample_rate_hz == HEAR_SAMPLE_RATE_HZ:
        return wave
    with torch.inference_mode():
        return torchaudio.functional.resample(torch.from_numpy(wave), HEAR_SAMPLE_RATE_HZ, sample_rate_hz).numpy()


def embed_task_with_module(task: TaskInfo, hear: HearModule, meter: EmbeddingProgress | None = None) -> dict:
    """Each split the probes use -> SplitArrays of the module's scene embeddings and the targets;
    `meter` counts the clips as they are embedded."""
    needed = sorted({name for fold in probe_splits(task) for name in (*fold.train, fold.valid, fold.test)})
    splits = {}
    for split in needed:
        labels = read_split_labels(task, split)
        if not labels:
            raise ValueError(f"task {task.name}: split {split} has no clips ({task.directory}/{split}.json)")
        file_names = sorted(labels)
        waves = [
            resample_from_hear_rate(read_task_audio(task, split, name), hear.sample_rate_hz) for name in file_names
        ]
        targets = encode_targets(task, [labels[name] for name in file_names])
        if meter is not None:
            meter.begin(f"task {task.name} ({split}, {len(file_names):,} clips)")
        embeddings = hear.scene_embeddings(waves, on_call=meter.advance if meter is not None else None)
        splits[split] = split_arrays(embeddings, targets)
    return splits


def evaluate_hear_module(
    hear: HearModule,
    *,
    tasks_dir: str,
    task_names: list[str] | None = None,
    pool: RankMePool | None = None,
    task_rankme_n: int = DEFAULT_TASK_RANKME_N,
    seeds: int = DEFAULT_SEEDS,
    probe_training: SceneProbe = ProbeTrainingConfig(),
    progress: Callable[[str], None] | None = None,
    progress_first_after_s: float = FIRST_LINE_AFTER_S,
    progress_every_s: float = EVERY_S,
) -> EvaluationResult:
    """R on `pool` (NaN when None) and per-task scores and Q of a HEAR module (see the module doc).
    `progress` gets a line as embedding starts, then by the clock (pipeline.evaluate.embedding_progress:
    after `progress_first_after_s`, then every `progress_every_s`), and one per task scored."""
    started = time.perf_counter()
    tasks = [read_task_info(directory) for directory in list_task_dirs(tasks_dir, task_names)]
    clips = sum(check_task_files(task) for task in tasks)  # a damaged task is named before anything is embedded
    meter = None
    if progress is not None:
        crops = pool.n if pool is not None else 0
        meter = EmbeddingProgress(
            progress, subject=f"HEAR module {hear.name}", total=crops + clips,
            detail=f"{crops:,} RankMe pool crops, {clips:,} clips of {len(tasks)} task(s)",
            first_after_s=progress_first_after_s, every_s=progress_every_s,
        )  # fmt: skip
    tick = time.perf_counter()
    pool_value = hear_module_pool_rankme(hear, pool, meter)
    seconds = {"rankme_pool": time.perf_counter() - tick}
    scores: dict[str, TaskScore] = {}
    features = []
    for task in tasks:
        tick = time.perf_counter()
        splits = embed_task_with_module(task, hear, meter)
        seconds[f"embed/{task.name}"], tick = time.perf_counter() - tick, time.perf_counter()
        scores[task.name], _ = probe_task(task, splits, seeds=seeds, training=probe_training)
        seconds[f"probe/{task.name}"] = time.perf_counter() - tick
        features.extend(split.features.numpy() for split in splits.values())
        if progress is not None:
            progress(
                f"[evaluate] {task.name}: {scores[task.name].metric} {scores[task.name].mean:.3f} by "
                f"{scores[task.name].probe} (embed {seconds[f'embed/{task.name}']:.1f} s)"
            )
    task_value = task_audio_rankme(np.concatenate(features), task_rankme_n)
    seconds["total"] = time.perf_counter() - started
    return EvaluationResult(
        checkpoint_dir=hear.model_file, model_name=hear.name, step=0, hear_module=hear.name,
        rankme=pool_value.value, rankme_n=pool_value.n, rankme_k=pool_value.k, rankme_pool=pool_value.pool,
        rankme_capped=pool_value.capped, task_rankme=task_value.value, task_rankme_n=task_value.n_samples,
        task_scores={name: score.to_dict() for name, score in scores.items()},
        q=quality_q({name: score.mean for name, score in scores.items()}), seeds=seeds,
        probe_protocol=asdict(probe_training), q_probe="+".join(sorted({score.probe for score in scores.values()})),
        seconds=seconds,
    )  # fmt: skip
