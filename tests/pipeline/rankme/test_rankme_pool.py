"""The RankMe pool: seeded, fingerprinted pretraining-domain crops every RankMe of a study uses."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
import torch

import models
from pipeline.audio.segments import Segment
from pipeline.checkpoint import save_model_checkpoint
from pipeline.evaluate.checkpoint_rankme import checkpoint_pool_rankme
from pipeline.evaluate.task_jobs import load_embedder
from pipeline.pretrain.config import PretrainConfig
from pipeline.pretrain.data import rankme_pool
from pipeline.rankme.model_rankme import measure_pool_rankme
from pipeline.rankme.pool import (
    MIN_SAMPLES_PER_FEATURE,
    PAPER_RANKME_N,
    crops_in_row,
    is_capped,
    iter_pool_crops,
    select_pool,
)
from pipeline.shards.format import read_shard_table, segments_to_table
from pipeline.shards.integrity import describe_part_files
from pipeline.shards.location import locate_shards
from sweeps.report.rankme_pool_check import rankme_pool_lines

N_MELS = 80


def write_shards(
    directory,
    *,
    rows: int = 30,
    frames: int = 250,
    seed: int = 0,
    n_mels: int = N_MELS,
    loc: float = 0.0,
    scale: float = 1.0,
):
    """A shard directory written directly (no prep, no Ray): `rows` segments of `frames` frames of
    N(loc, scale²) values (the manifest says mean 0, std 1 whatever they are)."""
    rng = np.random.default_rng(seed)
    directory.mkdir(parents=True)
    segments = [
        (
            f"src{i // 3}.wav",
            None,
            None,
            Segment(
                index=i % 3,
                offset_s=0.0,
                duration_s=frames / 100,
                mel=rng.normal(loc, scale, size=(frames, n_mels)).astype(np.float32),
            ),
        )
        for i in range(rows)
    ]
    half = rows // 2
    pq.write_table(segments_to_table(segments[:half], n_mels), directory / "part-00000.parquet")
    pq.write_table(segments_to_table(segments[half:], n_mels), directory / "part-00001.parquet")
    manifest = {
        "n_mels": n_mels,
        "num_rows": rows,
        "preset": {"name": "audiomae", "normalize_per_clip": True},
        "mean": [0.0] * n_mels,
        "std": [1.0] * n_mels,
        "rows_by_split": {},
        "part_files": describe_part_files(locate_shards(directory)),
    }
    (directory / "manifest.json").write_text(json.dumps(manifest))
    return directory


@pytest.fixture(scope="module")
def shards(tmp_path_factory):
    return write_shards(tmp_path_factory.mktemp("pool") / "shards")


def test_paper_n_is_the_studys_30000():
    # Deng et al., Sec. III-C / App. A: "we randomly sample 30,000 examples".
    assert PAPER_RANKME_N == 30_000


def test_crops_per_row_are_non_overlapping_with_a_half_crop_tail():
    assert crops_in_row(250, 100) == 3  # 100 + 100 + 50 (half a crop: padded, as training pads)
    assert crops_in_row(240, 100) == 2
    assert crops_in_row(60, 100) == 1 and crops_in_row(40, 100) == 0


def test_default_pool_is_every_crop_when_fewer_than_the_papers_n(shards):
    pool = select_pool(shards, crop_frames=100)
    assert pool.n == 30 * 3
    assert pool.clip_ids() == set(read_shard_table(shards, columns=["clip_id"])["clip_id"].to_pylist())


def test_pool_is_seeded_and_fingerprinted(shards):
    first, again = select_pool(shards, crop_frames=100, n=20), select_pool(shards, crop_frames=100, n=20)
    assert first == again and first.n == 20 and len(first.rows) == 7  # 6 whole rows of 3, 2 of the 7th
    assert select_pool(shards, crop_frames=100, n=20, seed=5).fingerprint != first.fingerprint
    assert select_pool(shards, crop_frames=50, n=20).fingerprint != first.fingerprint
    assert select_pool(shards, crop_frames=100, n=21).fingerprint != first.fingerprint


def test_pool_crops_have_the_models_length_and_count(shards):
    pool = select_pool(shards, crop_frames=100, n=20)
    batches = list(iter_pool_crops(pool, batch_crops=8))
    assert [len(b) for b in batches] == [8, 8, 4]
    assert batches[0].shape[1:] == (100, N_MELS) and batches[0].dtype == np.float32


def test_asking_for_more_crops_than_the_shards_hold_names_the_flag(shards):
    with pytest.raises(ValueError, match="--rankme-n"):
        select_pool(shards, crop_frames=100, n=10_000)


def test_capped_below_eight_times_the_embedding_width():
    assert MIN_SAMPLES_PER_FEATURE == 8
    assert is_capped(511, 64) and not is_capped(512, 64)


def test_training_and_evaluation_measure_on_the_same_pool(shards, tmp_path):
    config = PretrainConfig.from_flat(
        model_name="audiomae++-debug", shards_dir=str(shards), crop_frames=100, rankme_n=40
    )
    pool = rankme_pool(config)
    torch.manual_seed(0)
    model = models.build_model("audiomae++-debug", crop_frames=100)
    during_training = measure_pool_rankme(model, pool, device="cpu")
    checkpoint = save_model_checkpoint(
        tmp_path / "ckpt",
        model,
        model_name="audiomae++-debug",
        overrides={"crop_frames": 100},
        step=1,
        shard_fingerprint="t",
        extra={"pretrain_config": config.to_dict()},
    )
    embedder, meta = load_embedder(checkpoint, "cpu")
    at_evaluation = checkpoint_pool_rankme(embedder, meta)
    assert (at_evaluation.pool, at_evaluation.n, at_evaluation.k) == (pool.fingerprint, 40, during_training.k)
    assert at_evaluation.value == pytest.approx(during_training.value, rel=1e-5)
    assert at_evaluation.capped == is_capped(40, during_training.k) is True
    assert during_training.record()["rankme_capped"] is True


def test_checkpoint_without_shards_gets_nan_and_a_warning(tmp_path):
    model = models.build_model("audiomae++-debug")
    checkpoint = save_model_checkpoint(
        tmp_path / "c", model, model_name="audiomae++-debug", overrides={}, step=1, shard_fingerprint="t"
    )
    embedder, meta = load_embedder(checkpoint, "cpu")
    with pytest.warns(UserWarning, match="--rankme-shards"):
        assert math.isnan(checkpoint_pool_rankme(embedder, meta).value)


def test_report_says_one_pool_or_warns_and_names_capped_trials():
    same = pd.DataFrame(
        {
            "trial": ["a", "b"],
            "rankme_pool": ["p1", "p1"],
            "training_rankme_pool": ["p1", "p1"],
            "rankme_n": [600.0, 600.0],
            "training_rankme_n": [600.0, 600.0],
            "rankme_capped": [False, True],
        }
    )
    lines = "\n".join(rankme_pool_lines(same))
    assert "pool p1 with N = 600" in lines and "Capped" in lines and ": b;" in lines
    mixed = same.assign(training_rankme_pool=["p1", "p2"])
    assert "WARNING" in "\n".join(rankme_pool_lines(mixed))
