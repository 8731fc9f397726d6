"""The positive control: the study's encoder trained on the tasks' fold-0 training labels."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from models import build_model
from pipeline.evaluate.embeddings import FrameEmbedder
from pipeline.evaluate.positive_control import ControlConfig, train_positive_control, training_clips
from pipeline.evaluate.probes.knn import KnnProbeConfig
from pipeline.evaluate.probes.scene import probe_task
from pipeline.evaluate.task_embeddings import embed_task
from pipeline.task_format.reader import probe_splits, read_split_labels, read_task_info
from tests.support.hear_task_fixtures import build_tiny_language_task, build_tiny_tasks


@pytest.fixture(scope="module")
def tasks(tmp_path_factory):
    root = build_tiny_tasks(tmp_path_factory.mktemp("tasks"), clips_per_class={"train": 12, "valid": 6, "test": 6})
    return [read_task_info(root / name) for name in ("tones", "mixtures")]


def _embedder(seed: int) -> FrameEmbedder:
    torch.manual_seed(seed)
    return FrameEmbedder(build_model("mae-debug"))


def test_it_learns_from_training_clips_only(tasks):
    embedder = _embedder(0)
    for task in tasks:
        clips = training_clips(task, embedder)
        fold = probe_splits(task)[0]
        held_out = {(split, name) for split in (fold.valid, fold.test) for name in read_split_labels(task, split)}
        assert {split for split, _ in clips.file_names} == {"train"}
        assert held_out.isdisjoint(clips.file_names)
        assert len(clips.inputs) == len(clips.targets) == len(read_split_labels(task, "train"))


@pytest.fixture(scope="module")
def language_task(tmp_path_factory):
    root = tmp_path_factory.mktemp("language")
    build_tiny_language_task(root, clips_per_class={"train": 12, "valid": 6, "test": 8})
    return read_task_info(root / "toy_language")


def _knn_score(task, embedder) -> float:
    return probe_task(task, embed_task(task, embedder).splits, seeds=1, training=KnnProbeConfig())[0].mean


@pytest.mark.parametrize("seed", [0, 1])
def test_the_loss_falls_and_the_probe_rewards_the_trained_encoder(language_task, seed):
    # Toy languages told apart by syllable pitch patterns and rates: a random mae-debug scores
    # 0.75-0.875 with kNN here, so there is headroom a representation that carries the labels fills.
    embedder = _embedder(seed)
    before = _knn_score(language_task, embedder)
    losses = train_positive_control(embedder, [language_task], ControlConfig(steps=80, batch_clips=16, seed=seed))
    assert len(losses) == 80 and not embedder.model.training
    first, last = np.mean(losses[:10]), np.mean(losses[-10:])
    assert last < 0.1 * first, (first, last)
    after = _knn_score(language_task, embedder)
    assert before < 0.95 and after > before, (before, after)


def test_the_same_seed_trains_the_same_encoder(tasks):
    runs = []
    for _ in range(2):
        embedder = _embedder(3)
        losses = train_positive_control(embedder, tasks, ControlConfig(steps=6, batch_clips=8, seed=5))
        runs.append((losses, embedder.model.state_dict()))
    assert runs[0][0] == runs[1][0]
    for name, tensor in runs[0][1].items():
        torch.testing.assert_close(tensor, runs[1][1][name], msg=name)


def test_bad_settings_name_the_field():
    with pytest.raises(ValueError, match="steps, batch_clips and lr must be positive"):
        ControlConfig(steps=0)
