"""Language-ID probe: the model zoo's attentive-pooling head trained on frozen frame embeddings.

For tasks marked language-ID (`label_kind: "language"` in task_metadata.json, see
pipeline.task_format.reader), `python -m pipeline.evaluate --lid-head self|performer|agent` scores the task
with `models.heads.lid_head.LanguageIdHead` (attention over frames, attentive statistics pooling, a linear
classifier) on each clip's frame features, instead of the HEAR MLP on their mean: the order and
spread of frames, which the mean discards, is where spoken language lives.

Protocol: the paper's head setting (4 heads, attention width 64, dropout 0.2, Adam at lr 1e-4);
one configuration, no grid. Validation after every epoch; training stops after `patience_checks`
checks without a better validation score (or an equal one at a lower validation loss), or at
`max_epochs` (bounded so that a debug model's tasks train in seconds on 2 CPU cores); the test
score at the best validation check is reported, the same rule as the MLP grid
(pipeline.evaluate.probes.grid). Seeds 0..seeds-1, as for the MLP probe, change the initialisation, the
dropout masks and the batch order; mean and 95% t-interval over seeds (pipeline.evaluate.probes.seeds).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from models.heads.frame_attention import ATTENTION_KINDS
from models.heads.lid_head import LanguageIdHead
from pipeline.evaluate.probes.metrics import score_predictions
from pipeline.evaluate.probes.seeds import score_over_seeds_and_folds
from pipeline.evaluate.scores import TaskScore
from pipeline.task_format.reader import ProbeSplit, TaskInfo

PREDICT_BATCH_CLIPS = 256


@dataclass(frozen=True, kw_only=True)
class LidProbeConfig:
    """The language-ID head and its training schedule; head settings are the paper's."""

    attention: str = "agent"  # "self" | "performer" | "agent" (models.heads.frame_attention)
    heads: int = 4
    attention_dim: int = 64
    dropout: float = 0.2
    learning_rate: float = 1e-4
    batch_size: int = 32  # small batches: more Adam steps per epoch at the paper's low learning rate
    max_epochs: int = 40
    validate_every_epochs: int = 1
    patience_checks: int = 8

    def __post_init__(self) -> None:
        if self.attention not in ATTENTION_KINDS:
            raise ValueError(f"unknown LID attention {self.attention!r}; choose one of {', '.join(ATTENTION_KINDS)}")

    @property
    def probe_name(self) -> str:
        """How results name this probe, e.g. "lid-agent"."""
        return f"lid-{self.attention}"


@dataclass(frozen=True, kw_only=True)
class FrameSplit:
    """Frame embeddings of one split, right-padded to a common length."""

    frames: torch.Tensor  # (clips, max_frames, dim) float32; zeros after each clip's last frame
    valid_frames: torch.Tensor  # (clips, max_frames) bool, True = real frame
    targets: torch.Tensor  # (clips,) long class indices


@dataclass(frozen=True, kw_only=True)
class LidResult:
    validation_score: float
    test_score: float
    epochs_trained: int


def pad_frame_features(per_clip: Sequence[np.ndarray], targets: np.ndarray) -> FrameSplit:
    """Clips' frame features [(frames_i, dim)] and class indices (clips,) -> a padded FrameSplit."""
    if len(per_clip) != len(targets):
        raise ValueError(f"{len(per_clip)} clips of frame features but {len(targets)} targets")
    if not per_clip:
        raise ValueError("no clips to pad")
    if any(len(frames) == 0 for frames in per_clip):
        raise ValueError("a clip has no frame features; the LID head needs at least one frame per clip")
    lengths = torch.tensor([len(frames) for frames in per_clip])
    frames = torch.zeros(len(per_clip), int(lengths.max()), per_clip[0].shape[1])
    for index, clip_frames in enumerate(per_clip):
        frames[index, : len(clip_frames)] = torch.from_numpy(np.asarray(clip_frames, dtype=np.float32))
    valid_frames = torch.arange(frames.shape[1]).unsqueeze(0) < lengths.unsqueeze(1)
    return FrameSplit(
        frames=frames, valid_frames=valid_frames, targets=torch.as_tensor(np.asarray(targets), dtype=torch.long)
    )


def concat_frame_splits(splits: Sequence[FrameSplit]) -> FrameSplit:
    """Several splits as one (k-fold training sets), padded to the longest of them."""
    if len(splits) == 1:
        return splits[0]
    n_clips = sum(len(split.targets) for split in splits)
    max_frames = max(split.frames.shape[1] for split in splits)
    frames = torch.zeros(n_clips, max_frames, splits[0].frames.shape[2])
    valid_frames = torch.zeros(n_clips, max_frames, dtype=torch.bool)
    row = 0
    for split in splits:
        clips, length = split.valid_frames.shape
        frames[row : row + clips, :length] = split.frames
        valid_frames[row : row + clips, :length] = split.valid_frames
        row += clips
    return FrameSplit(frames=frames, valid_frames=valid_frames, targets=torch.cat([split.targets for split in splits]))


def _standardiser(train: FrameSplit) -> tuple[torch.Tensor, torch.Tensor]:
    # Frozen encoders' features can sit far from zero with very uneven scales per dimension. The
    # head's first layer is a Linear ahead of its LayerNorm, and at lr 1e-4 such inputs slow
    # learning by orders of magnitude; an affine map per dimension, fitted on the training split's
    # real frames only, removes that without changing what the features can tell apart.
    real = train.frames[train.valid_frames]  # (real frames, dim)
    std, mean = torch.std_mean(real, dim=0)
    return mean, std.clamp_min(1e-6)


def _standardised(split: FrameSplit, mean: torch.Tensor, std: torch.Tensor) -> FrameSplit:
    frames = ((split.frames - mean) / std).masked_fill(~split.valid_frames.unsqueeze(-1), 0.0)
    return FrameSplit(frames=frames, valid_frames=split.valid_frames, targets=split.targets)


def _batch(split: FrameSplit, index: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The clips at `index`, trimmed to the longest real clip among them (padding costs nothing)."""
    valid = split.valid_frames[index]
    length = int(valid.sum(dim=1).max())
    return split.frames[index, :length], valid[:, :length]


@torch.inference_mode()
def _predict(head: LanguageIdHead, split: FrameSplit) -> torch.Tensor:
    head.eval()
    logits = []
    for start in range(0, len(split.targets), PREDICT_BATCH_CLIPS):
        frames, valid = _batch(split, torch.arange(start, min(start + PREDICT_BATCH_CLIPS, len(split.targets))))
        logits.append(head(frames, valid))
    return torch.cat(logits).unsqueeze(0)  # (1 config, clips, classes), as score_predictions takes it


def train_lid_probe(
    *,
    train: FrameSplit,
    valid: FrameSplit,
    test: FrameSplit,
    n_classes: int,
    metric: str = "top1_acc",
    seed: int,
    config: LidProbeConfig = LidProbeConfig(),
    class_labels: list[str] | None = None,
) -> LidResult:
    """Train one head on `train` with early stopping on `valid`; its test score at the best check."""
    mean, std = _standardiser(train)
    train, valid, test = (_standardised(split, mean, std) for split in (train, valid, test))
    torch.manual_seed(seed)  # initialisation and dropout masks
    head = LanguageIdHead(
        train.frames.shape[-1],
        n_classes,
        attention=config.attention,
        heads=config.heads,
        attention_dim=config.attention_dim,
        dropout=config.dropout,
    )
    optimizer = torch.optim.Adam(head.parameters(), lr=config.learning_rate)
    shuffle_generator = torch.Generator().manual_seed(seed)
    best_validation, best_loss, test_at_best, checks_since_best, epoch = -np.inf, np.inf, np.nan, 0, 0
    n_train = len(train.targets)
    for epoch in range(1, config.max_epochs + 1):
        head.train()
        order = torch.randperm(n_train, generator=shuffle_generator)
        for start in range(0, n_train, config.batch_size):
            index = order[start : start + config.batch_size]
            frames, valid_frames = _batch(train, index)
            loss = F.cross_entropy(head(frames, valid_frames), train.targets[index])
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
        if epoch % config.validate_every_epochs:
            continue
        validation_logits = _predict(head, valid)
        validation_score = float(
            score_predictions(metric, validation_logits, valid.targets, class_labels=class_labels)[0]
        )
        validation_loss = float(F.cross_entropy(validation_logits[0], valid.targets))
        # At lr 1e-4 accuracy on a small validation split moves in steps and can sit on a plateau
        # for many epochs while the head is still learning; a tie in score with a lower validation
        # loss therefore counts as progress, so patience runs out only when learning has stopped.
        improved = validation_score > best_validation or (
            validation_score == best_validation and validation_loss < best_loss
        )
        if improved:
            best_validation, best_loss, checks_since_best = validation_score, validation_loss, 0
            test_at_best = float(
                score_predictions(metric, _predict(head, test), test.targets, class_labels=class_labels)[0]
            )
        else:
            checks_since_best += 1
            if checks_since_best >= config.patience_checks:
                break
    return LidResult(validation_score=float(best_validation), test_score=test_at_best, epochs_trained=epoch)


def probe_task_lid(
    task: TaskInfo,
    frames_by_split: Mapping[str, FrameSplit],
    *,
    seeds: int,
    config: LidProbeConfig = LidProbeConfig(),
) -> tuple[TaskScore, list[LidResult]]:
    """Test score of the LID head per seed (averaged over folds), with its 95% CI."""
    if task.multilabel:
        raise ValueError(f"task {task.name}: the language-ID probe is multiclass only, the task is multilabel")

    def score_fold(fold: ProbeSplit, seed: int) -> LidResult:
        return train_lid_probe(
            train=concat_frame_splits([frames_by_split[name] for name in fold.train]),
            valid=frames_by_split[fold.valid],
            test=frames_by_split[fold.test],
            n_classes=len(task.labels),
            metric=task.primary_metric,
            seed=seed,
            config=config,
            class_labels=list(task.labels),
        )

    return score_over_seeds_and_folds(
        task,
        frames_by_split.keys(),
        seeds=seeds,
        probe=config.probe_name,
        score_fold=score_fold,
        inputs="frame embeddings",
    )
