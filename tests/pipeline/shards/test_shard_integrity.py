"""Readers check the part files against the manifest's list; short segments fail before training."""

from __future__ import annotations

import hashlib
import json
import shutil

import pyarrow.parquet as pq
import pytest

from pipeline.pretrain.driver import PretrainConfig, run_pretraining
from pipeline.rankme.pool import iter_pool_crops, select_pool
from pipeline.shards.crop_stream import StreamPlan
from pipeline.shards.crops import (
    ShortSegmentsError,
    check_segments_fit_crop,
    read_crops,
)
from pipeline.shards.format import read_manifest, read_shard_table
from pipeline.shards.integrity import ShardIntegrityError
from tests.support.prep_helpers import labeled_shards

pytestmark = pytest.mark.ray

READERS = {
    "training stream": lambda d: StreamPlan(d, crop_frames=100, seed=0, rank=0, world_size=1),
    "validation crops": lambda d: read_crops(d, crop_frames=100, seed=0, limit=4),
    "rankme pool": lambda d: select_pool(d, crop_frames=100, n=2),
    "table": lambda d: read_shard_table(d, columns=["num_frames"]),
}


@pytest.fixture(scope="module")
def original(ray_local, tmp_path_factory):
    return labeled_shards(tmp_path_factory)


@pytest.fixture()
def shards(original, tmp_path):
    """A private copy: these tests damage it."""
    return shutil.copytree(original, tmp_path / "shards")


def test_manifest_lists_every_part_file_with_rows_bytes_and_sha256(original):
    manifest = read_manifest(original)
    parts = sorted(original.glob("part-*.parquet"))
    assert len(parts) >= 2
    assert manifest["part_files"] == [
        {
            "name": p.name,
            "rows": pq.read_metadata(p).num_rows,
            "bytes": p.stat().st_size,
            "sha256": hashlib.sha256(p.read_bytes()).hexdigest(),
        }
        for p in parts
    ]
    assert sum(record["rows"] for record in manifest["part_files"]) == manifest["num_rows"]


@pytest.mark.parametrize("reader", READERS)
def test_a_deleted_part_file_is_named_by_every_reader(shards, reader):
    victim = sorted(shards.glob("part-*.parquet"))[1]
    victim.unlink()
    with pytest.raises(ShardIntegrityError, match=rf"{victim.name} is missing.*re-run prep"):
        READERS[reader](shards)


@pytest.mark.parametrize("reader", READERS)
def test_a_changed_byte_is_named_by_every_reader(shards, reader):
    victim = sorted(shards.glob("part-*.parquet"))[0]
    data = bytearray(victim.read_bytes())
    data[len(data) // 2] ^= 0xFF
    victim.write_bytes(bytes(data))
    with pytest.raises(ShardIntegrityError, match=rf"{victim.name} differs from its sha256"):
        READERS[reader](shards)


def test_a_truncated_part_file_is_named_with_its_sizes(shards):
    victim = sorted(shards.glob("part-*.parquet"))[0]
    size = victim.stat().st_size
    victim.write_bytes(victim.read_bytes()[: size // 2])
    with pytest.raises(ShardIntegrityError, match=rf"{victim.name} is {size // 2} bytes, manifest.json says {size}"):
        StreamPlan(shards, crop_frames=100, seed=0, rank=0, world_size=1)


def test_an_unlisted_part_file_is_refused(shards):
    first = sorted(shards.glob("part-*.parquet"))[0]
    shutil.copy(first, shards / "part-99999-other-run.parquet")
    with pytest.raises(ShardIntegrityError, match="part-99999-other-run.parquet is not listed"):
        StreamPlan(shards, crop_frames=100, seed=0, rank=0, world_size=1)


def test_the_pool_iterator_checks_too(shards):
    pool = select_pool(shards, crop_frames=100, n=2)
    sorted(shards.glob("part-*.parquet"))[-1].unlink()
    with pytest.raises(ShardIntegrityError, match="is missing"):
        next(iter_pool_crops(pool))


def test_a_manifest_without_checksums_asks_to_re_run_prep(shards):
    manifest = json.loads((shards / "manifest.json").read_text())
    manifest["part_files"] = [record["name"] for record in manifest["part_files"]]  # the old format
    (shards / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(ShardIntegrityError, match=r"lists no part-file checksums.*python -m pipeline.prep --input"):
        StreamPlan(shards, crop_frames=100, seed=0, rank=0, world_size=1)


def test_a_truncated_manifest_is_named(shards):
    (shards / "manifest.json").write_text('{"format_version": 1, "fing')
    with pytest.raises(ShardIntegrityError, match=r"shards/manifest.json is damaged"):
        read_manifest(shards)


def test_segments_all_shorter_than_half_a_crop_are_refused_with_their_lengths(original):
    # The labeled corpus's segments are 81 to 501 frames; a 1024-frame crop needs 512.
    with pytest.raises(
        ShortSegmentsError,
        match=r"crops are 1024 frames.*at least 512.*81 to 501 frames.*"
        r"--crop-frames \(at most 1003 frames here\)",
    ):
        check_segments_fit_crop(original, crop_frames=1024)
    check_segments_fit_crop(original, crop_frames=1003)  # 501 >= 1003 // 2: the longest segment fits


def test_pretraining_refuses_short_segments_before_training_starts(original, tmp_path):
    config = PretrainConfig.from_flat(
        model_name="audiomae++-debug",
        model_overrides={"crop_frames": 1024},
        shards_dir=str(original),
        steps=2,
        global_batch_size=2,
        micro_batch_size=2,
        num_workers=1,
        cpus_per_worker=0.5,
        run_name="short",
        storage_path=str(tmp_path / "ray_results"),
        tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}",
    )
    with pytest.raises(ShortSegmentsError, match=str(original)):
        run_pretraining(config)
    assert not (tmp_path / "ray_results").exists()  # no TorchTrainer was built
