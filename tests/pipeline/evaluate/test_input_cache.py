"""Task clips are decoded and turned into model input once per process, however many checkpoints
are evaluated (pipeline.evaluate.input_cache), and the cached input is the uncached one."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from models import build_model
from pipeline.evaluate import input_cache
from pipeline.evaluate.embeddings import FrameEmbedder
from pipeline.evaluate.task_embeddings import embed_task
from pipeline.task_format.reader import read_task_info
from tests.support.hear_task_fixtures import build_tiny_tasks


@pytest.fixture()
def task(tmp_path):
    input_cache.clear()
    yield read_task_info(build_tiny_tasks(tmp_path) / "tones")
    input_cache.clear()


def _embedder(seed: int) -> FrameEmbedder:
    torch.manual_seed(seed)
    return FrameEmbedder(build_model("mae-debug"))


def _count_reads(monkeypatch) -> list[str]:
    reads: list[str] = []
    real = input_cache.read_task_audio

    def counting(task, split, name):
        reads.append(f"{split}/{name}")
        return real(task, split, name)

    monkeypatch.setattr(input_cache, "read_task_audio", counting)
    return reads


def test_a_second_checkpoint_reuses_the_inputs_and_gets_its_own_embeddings(task, monkeypatch):
    reads = _count_reads(monkeypatch)
    first = embed_task(task, _embedder(seed=0))
    n_clips = len(reads)
    assert n_clips == 60  # 3 classes x (10 train + 5 valid + 5 test), each read once
    second = embed_task(task, _embedder(seed=1))  # another checkpoint of the same model
    assert len(reads) == n_clips  # no clip decoded again
    # Different weights, different embeddings: the cache holds inputs, never features.
    assert not np.allclose(first.splits["test"].features.numpy(), second.splits["test"].features.numpy())


def test_cached_embeddings_equal_uncached_ones(task, monkeypatch):
    embedder = _embedder(seed=0)
    embed_task(task, embedder)  # fills the cache
    cached = embed_task(task, embedder)
    monkeypatch.setenv("AUDIOSCALE_INPUT_CACHE_MB", "0")  # off: read and transform again
    input_cache.clear()
    uncached = embed_task(task, embedder)
    for split in uncached.splits:
        assert torch.equal(cached.splits[split].features, uncached.splits[split].features)


def test_a_rewritten_split_is_read_again(task, monkeypatch):
    reads = _count_reads(monkeypatch)
    embedder = _embedder(seed=0)
    embed_task(task, embedder)
    before = len(reads)
    labels_file = task.directory / "test.json"
    labels = json.loads(labels_file.read_text())
    dropped = sorted(labels)[0]
    labels_file.write_text(json.dumps({k: v for k, v in labels.items() if k != dropped}))
    again = embed_task(task, embedder)
    assert len(reads) > before  # the changed split was read again
    assert len(again.splits["test"].features) == len(labels) - 1


def test_the_disk_cache_serves_a_new_process(task, monkeypatch, tmp_path):
    monkeypatch.setenv("AUDIOSCALE_INPUT_CACHE_DIR", str(tmp_path / "inputs"))
    embedder = _embedder(seed=0)
    first = embed_task(task, embedder)
    assert len(list((tmp_path / "inputs").glob("*.npz"))) == 3  # train, valid, test
    input_cache.clear()  # as a new trial process starts with nothing in memory
    reads = _count_reads(monkeypatch)
    second = embed_task(task, embedder)
    assert reads == []
    for split in first.splits:
        assert torch.equal(first.splits[split].features, second.splits[split].features)


def test_an_unwritable_disk_cache_is_said_once_and_the_scores_go_on(task, monkeypatch, tmp_path, capsys):
    (tmp_path / "home").write_text("a file where the cache folder's parent should be")  # as a read-only home
    monkeypatch.setenv("AUDIOSCALE_INPUT_CACHE_DIR", str(tmp_path / "home" / "cache"))
    embedder = _embedder(seed=0)
    cached = embed_task(task, embedder)  # three splits, three failed writes
    notes = [line for line in capsys.readouterr().err.splitlines() if line.startswith("note: task inputs")]
    assert len(notes) == 1 and str(tmp_path / "home" / "cache") in notes[0]
    monkeypatch.delenv("AUDIOSCALE_INPUT_CACHE_DIR")
    input_cache.clear()
    for split, embedded in embed_task(task, embedder).splits.items():
        assert torch.equal(cached.splits[split].features, embedded.features)


def test_a_study_given_its_own_tasks_caches_nothing_under_the_home(tmp_path):
    """Before, a study's trials cached task inputs under `$AUDIOSCALE_HOME/cache` even when every location
    flag named another place; the default tasks (in the home) still share the home's cache between studies."""
    home = input_cache.audioscale_home()
    assert input_cache.shared_cache_dir(home / "tasks") == home / "cache" / "task_inputs"
    elsewhere = input_cache.shared_cache_dir(tmp_path / "my_tasks")
    assert not elsewhere.is_relative_to(home)
