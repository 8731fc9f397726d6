"""Scene embeddings of every split of a HEAR task, computed once and reused by every probe run."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pipeline.embeddings import FrameEmbedder
from pipeline.probe_grid import SplitArrays
from pipeline.probes import split_arrays
from pipeline.task_data import TaskInfo, encode_targets, probe_splits, read_split_labels, read_task_audio


@dataclass(frozen=True, kw_only=True)
class TaskEmbeddings:
    task: TaskInfo
    splits: dict[str, SplitArrays]  # split name -> scene embeddings (n, dim) and targets

    def all_features(self) -> np.ndarray:
        """Every clip's scene embedding (n_clips, dim), all splits, in split order."""
        return np.concatenate([split.features.numpy() for split in self.splits.values()])


def embed_task(task: TaskInfo, embedder: FrameEmbedder) -> TaskEmbeddings:
    """Read each split's audio clip by clip (bounded memory) and embed it with the frozen model."""
    needed = sorted({name for fold in probe_splits(task) for name in (*fold.train, fold.valid, fold.test)})
    splits = {}
    for split in needed:
        labels = read_split_labels(task, split)
        if not labels:
            raise ValueError(f"task {task.name}: split {split} has no clips ({task.directory}/{split}.json)")
        file_names = sorted(labels)
        waves = (read_task_audio(task, split, name) for name in file_names)
        features = embedder.scene_embeddings(waves)  # (n, dim)
        targets = encode_targets(task, [labels[name] for name in file_names])
        splits[split] = split_arrays(features, targets)
    return TaskEmbeddings(task=task, splits=splits)
