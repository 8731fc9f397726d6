"""Shard readers take a URI as well as a local folder (real pyarrow filesystems, `file://` offline)."""

from __future__ import annotations

import shutil

import numpy as np
import pyarrow.parquet as pq
import pytest

from pipeline.shards.crop_stream import CropStream, StreamPlan, StreamPosition, batches
from pipeline.shards.crops import CropBatch, count_short_segments
from pipeline.shards.format import (
    part_files,
    read_manifest,
    read_rejected,
    read_shard_table,
)
from pipeline.shards.location import ShardLocationError, locate_shards
from tests.support.prep_helpers import labeled_shards


@pytest.fixture(scope="module")
def shards(ray_local, tmp_path_factory):
    return labeled_shards(tmp_path_factory)


@pytest.fixture(scope="module")
def copied_uri(shards, tmp_path_factory):
    """The shards copied (as to a bucket) under a folder with a space and a `key=value` name,
    which a hive-partitioning reader would turn into a column; returned as a file:// URI."""
    target = tmp_path_factory.mktemp("bucket") / "run=1" / "my shards"
    shutil.copytree(shards, target)
    uri = target.as_uri()
    assert "%20" in uri and uri.startswith("file:///")
    return uri


def test_read_manifest_and_rejected_through_a_uri_equal_the_local_read(shards, copied_uri):
    assert read_manifest(copied_uri) == read_manifest(shards)
    assert read_rejected(copied_uri) == read_rejected(shards) == []


def test_read_shard_table_through_a_uri_equals_the_local_read(shards, copied_uri):
    remote = read_shard_table(copied_uri, columns=["clip_id", "num_frames", "mel"])
    local = read_shard_table(shards, columns=["clip_id", "num_frames", "mel"])
    assert remote.num_rows == 8 and remote.equals(local)


def test_part_files_of_a_uri_are_uris_that_pyarrow_opens(shards, copied_uri):
    uris = part_files(copied_uri)
    assert [uri.rsplit("/", 1)[1] for uri in uris] == [path.name for path in part_files(shards)]
    assert all(uri.startswith(copied_uri + "/part-") for uri in uris)
    assert sum(pq.read_table(uri).num_rows for uri in uris) == 8


def test_the_training_stream_through_a_uri_gives_the_local_crops(shards, copied_uri):
    plan = StreamPlan(copied_uri, crop_frames=200, seed=3, rank=0, world_size=1)
    assert plan.rows_per_epoch == 8 - count_short_segments(copied_uri, crop_frames=200) == 7
    remote, _ = next(batches(CropStream(plan, window_rows=4), batch_size=7, start=StreamPosition()))
    # The same crops as the policy makes from the local rows (crops are seeded per clip; the stream
    # shuffles them, so compare them ordered by their sums).
    udf = CropBatch(
        crop_frames=200, min_frames=100, seed=3, n_mels=80, split=None, per_clip=True, bin_mean=None, bin_std=None
    )
    local = udf(read_shard_table(shards))["mel"]
    remote_mels = sorted(remote.normalised(), key=lambda mel: float(mel.sum()))
    local_mels = sorted(local, key=lambda mel: float(mel.sum()))
    np.testing.assert_array_equal(np.stack(remote_mels), np.stack(local_mels))


def test_a_uri_without_a_manifest_is_an_error_naming_the_uri(tmp_path):
    uri = (tmp_path / "empty bucket").as_uri()
    with pytest.raises(FileNotFoundError, match="no manifest.json") as error:
        read_manifest(uri)
    assert uri in str(error.value) and "copy the whole directory" in str(error.value)
    with pytest.raises(FileNotFoundError, match="empty%20bucket"):
        StreamPlan(uri, crop_frames=100, seed=0, rank=0, world_size=1)


def test_a_uri_pyarrow_cannot_open_is_an_error_naming_it():
    with pytest.raises(ShardLocationError, match="nosuch://bucket/shards"):
        read_manifest("nosuch://bucket/shards")


def test_a_relative_local_path_resolves_from_the_callers_directory(shards, monkeypatch):
    monkeypatch.chdir(shards.parent)
    location = locate_shards("shards")
    assert location.path == str(shards) and read_manifest("shards") == read_manifest(shards)
