"""A positive control for Q: the study's encoder trained *supervised* on the tasks' own training clips.

Whether a probe on these tasks can reward a better representation at all is an assumption until a
representation that provably carries the labels scores higher than a random initialisation. The
control is that representation: the same architecture, trained end to end on the tasks' labels
with one linear head per task on the pooled frame features (the readout the probe reads), cross-
entropy for multiclass and binary cross-entropy for multilabel tasks, one task per step in turn.

It learns from fold 0's training splits only (`probe_splits(task)[0].train`), so fold 0's
validation and test clips are never seen: compare the control with other representations on
fold 0 (for a train/valid/test task, its only fold). Clips are cut to the model's crop length at a
random place each time they are drawn (shorter ones padded with the clip's silence value, as
embedding pads them), from the same normalised log-mel the probe's embedder computes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from pipeline.evaluate.embeddings import FrameEmbedder
from pipeline.evaluate.input_cache import model_inputs
from pipeline.task_format.reader import TaskInfo, encode_targets, probe_splits, read_split_labels


@dataclass(frozen=True, kw_only=True)
class ControlConfig:
    steps: int = 700  # optimizer steps over all tasks (one task per step, in turn)
    batch_clips: int = 32
    lr: float = 1e-3  # AdamW; a supervised encoder this small trains stably here (tested on the tiny tasks)
    weight_decay: float = 0.01
    seed: int = 0

    def __post_init__(self) -> None:
        if self.steps < 1 or self.batch_clips < 1 or self.lr <= 0:
            raise ValueError(f"control: steps, batch_clips and lr must be positive, got {self}")


@dataclass(frozen=True, kw_only=True)
class TrainingClips:
    task: TaskInfo
    file_names: tuple[tuple[str, str], ...]  # (split, file name) of every clip, in `inputs` order
    inputs: list[np.ndarray]  # normalised log-mel (frames, n_mels) per clip
    targets: torch.Tensor  # (n,) class indices, or (n, classes) multi-hot for multilabel tasks


def training_clips(task: TaskInfo, embedder: FrameEmbedder) -> TrainingClips:
    """Fold 0's training clips of `task` as the embedder's model inputs, with their targets."""
    names, inputs, labels = [], [], []
    for split in probe_splits(task)[0].train:
        split_labels = read_split_labels(task, split)
        file_names = sorted(split_labels)
        names += [(split, name) for name in file_names]
        inputs += model_inputs(task, split, file_names, embedder)
        labels += [split_labels[name] for name in file_names]
    targets = torch.from_numpy(encode_targets(task, labels))
    targets = targets.float() if task.multilabel else targets.long()
    return TrainingClips(task=task, file_names=tuple(names), inputs=inputs, targets=targets)


def crop_batch(
    clips: TrainingClips, rows: np.ndarray, *, crop_frames: int, silence: Callable[[np.ndarray], float], rng
) -> torch.Tensor:
    """(batch, crop_frames, n_mels): a random crop of each chosen clip, short clips padded at the end."""
    crops = []
    for row in rows:
        mel = clips.inputs[row]
        start = int(rng.integers(0, len(mel) - crop_frames + 1)) if len(mel) > crop_frames else 0
        crop = mel[start : start + crop_frames]
        if len(crop) < crop_frames:
            crop = np.pad(crop, ((0, crop_frames - len(crop)), (0, 0)), constant_values=silence(mel))
        crops.append(crop)
    return torch.from_numpy(np.stack(crops).astype(np.float32))


def _loss(logits: torch.Tensor, targets: torch.Tensor, multilabel: bool) -> torch.Tensor:
    if multilabel:
        return nn.functional.binary_cross_entropy_with_logits(logits, targets)
    return nn.functional.cross_entropy(logits, targets)


def train_positive_control(
    embedder: FrameEmbedder,
    tasks: Sequence[TaskInfo],
    config: ControlConfig = ControlConfig(),
    progress: Callable[[str], None] | None = None,
) -> list[float]:
    """Train `embedder.model` in place on the tasks' fold-0 training labels; returns each step's loss.

    The embedder's model is left in eval mode, ready to embed like any checkpoint."""
    torch.manual_seed(config.seed)
    rng = np.random.default_rng(config.seed)
    model = embedder.model
    data = [training_clips(task, embedder) for task in tasks]
    width = int(embedder.spec.embed_dim)
    heads = nn.ModuleList(nn.Linear(width, len(task.labels)) for task in tasks)
    parameters = [*model.parameters(), *heads.parameters()]
    optimizer = torch.optim.AdamW(parameters, lr=config.lr, weight_decay=config.weight_decay)
    losses = []
    model.train()
    for step in range(config.steps):
        index = step % len(data)
        clips = data[index]
        rows = rng.integers(0, len(clips.inputs), size=config.batch_clips)
        batch = crop_batch(clips, rows, crop_frames=embedder.spec.crop_frames, silence=embedder.preset.silence, rng=rng)
        pooled = model.embed(batch).mean(dim=1)  # (batch, width): the probe's mean-over-time readout
        loss = _loss(heads[index](pooled), clips.targets[torch.from_numpy(rows)], clips.task.multilabel)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
        if progress is not None and (step + 1) % max(1, config.steps // 10) == 0:
            recent = np.mean(losses[-len(data) :])
            progress(f"[control] step {step + 1}/{config.steps}: mean loss of the last round {recent:.3f}")
    model.eval()
    return losses
