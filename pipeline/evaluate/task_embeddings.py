"""Embeddings of every split of a HEAR task, computed once and reused by every probe run.

Each clip's model input comes from the per-process cache (pipeline.evaluate.input_cache: decoded and
turned into log-mel once per process, however many checkpoints are evaluated) and goes through the
frozen model once: its frame features give the scene embedding (their
mean, as `FrameEmbedder.scene_embeddings` computes it) and, when asked (language-ID tasks probed
with the LID head), are also kept, right-padded per split, for `pipeline.evaluate.probes.lid`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pipeline.evaluate.embeddings import FrameEmbedder
from pipeline.evaluate.input_cache import model_inputs
from pipeline.evaluate.probes.grid import SplitArrays
from pipeline.evaluate.probes.lid import FrameSplit, pad_frame_features
from pipeline.evaluate.probes.scene import split_arrays
from pipeline.task_format.reader import (
    TaskInfo,
    encode_targets,
    probe_splits,
    read_split_labels,
)


@dataclass(frozen=True, kw_only=True)
class TaskEmbeddings:
    task: TaskInfo
    splits: dict[str, SplitArrays]  # split name -> scene embeddings (n, dim) and targets
    frames: dict[str, FrameSplit] | None = None  # split name -> padded frame embeddings, when kept

    def all_features(self) -> np.ndarray:
        """Every clip's scene embedding (n_clips, dim), all splits, in split order."""
        return np.concatenate([split.features.numpy() for split in self.splits.values()])


def embed_task(task: TaskInfo, embedder: FrameEmbedder, *, keep_frames: bool = False) -> TaskEmbeddings:
    """Read each split's audio clip by clip and embed it with the frozen model. Memory: the scene
    embeddings, plus every clip's frame features when `keep_frames` (multiclass tasks only)."""
    if keep_frames and task.multilabel:
        raise ValueError(
            f"task {task.name}: frame embeddings are kept for the multiclass LID probe; the task is multilabel"
        )
    needed = sorted({name for fold in probe_splits(task) for name in (*fold.train, fold.valid, fold.test)})
    splits, frames = {}, {}
    for split in needed:
        labels = read_split_labels(task, split)
        if not labels:
            raise ValueError(f"task {task.name}: split {split} has no clips ({task.directory}/{split}.json)")
        file_names = sorted(labels)
        inputs = model_inputs(task, split, file_names, embedder)
        targets = encode_targets(task, [labels[name] for name in file_names])
        pooled, kept = [], []
        for clip_frames in _iter_features(embedder, inputs):  # (frames_i, dim) float32
            pooled.append(clip_frames.mean(axis=0))
            if keep_frames:
                kept.append(clip_frames)
        splits[split] = split_arrays(np.stack(pooled).astype(np.float32, copy=False), targets)
        if keep_frames:
            frames[split] = pad_frame_features(kept, targets)
    return TaskEmbeddings(task=task, splits=splits, frames=frames if keep_frames else None)


def _iter_features(embedder: FrameEmbedder, inputs: list[np.ndarray]):
    """Frame features of each input, `clips_per_group` clips at a time (bounded memory)."""
    step = embedder.clips_per_group
    for start in range(0, len(inputs), step):
        yield from embedder.frame_features_of_inputs(inputs[start : start + step])
