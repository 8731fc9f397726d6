"""The bucket preflight (`pipeline.storage.bucket_check`) against a real signed S3 store on loopback: each
fault a bucket brings is one UserError naming the flag, the URI, the endpoint and what to do."""

from __future__ import annotations

import time

import pytest

from cluster.rehearsal.object_store import free_port
from pipeline.cli.errors import UserError
from pipeline.storage.bucket_check import PROBE_PREFIX, check_bucket


def test_a_usable_bucket_passes_and_the_write_probe_leaves_nothing_behind(bucket_env):
    check_bucket(bucket_env.uri("runs"), what="--storage-path", write=True)
    assert not [key for key in bucket_env.keys() if PROBE_PREFIX in key]


def test_wrong_credentials_are_one_line_naming_the_flag_and_the_variables(bucket_env, monkeypatch):
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "not-the-key")
    with pytest.raises(UserError) as error:
        check_bucket(bucket_env.uri("shards"), what="--shards", write=False)
    message = str(error.value)
    assert message.startswith(f"--shards s3://{bucket_env.bucket}/shards (at {bucket_env.endpoint})")
    assert "refused these credentials" in message and "AWS_SECRET_ACCESS_KEY" in message
    assert "\n" not in message and "endpoint_override" not in message  # the URI's options are not repeated


def test_a_bucket_that_does_not_exist_is_named(bucket_env):
    # An S3 listing of a missing prefix is only "not found": without the bucket lookup this passed.
    with pytest.raises(UserError, match="bucket 'no-such-bucket' does not exist; create it first"):
        check_bucket(bucket_env.uri("shards", bucket="no-such-bucket"), what="--shards", write=False)


def test_an_endpoint_that_is_down_is_said_within_seconds(bucket_env):
    started = time.monotonic()
    with pytest.raises(UserError, match="cannot reach the store; is it running") as error:
        check_bucket(bucket_env.uri("runs", port=free_port()), what="--storage-path", write=True)
    assert time.monotonic() - started < 30
    assert "endpoint_override=HOST:PORT" in str(error.value)


def test_a_read_only_policy_passes_reads_and_refuses_writes(bucket_env, monkeypatch):
    reader = bucket_env.read_only_user("test-reader")
    for name, value in reader.env().items():
        monkeypatch.setenv(name, value)
    check_bucket(bucket_env.uri("shards"), what="--shards", write=False)
    with pytest.raises(UserError, match="may read the bucket but not write in it"):
        check_bucket(bucket_env.uri("runs"), what="--storage-path", write=True)


def test_local_paths_are_left_to_the_folder_checks(tmp_path):
    check_bucket(str(tmp_path / "not-made-yet"), what="--output", write=True)
    assert not (tmp_path / "not-made-yet").exists()


def test_a_uri_pyarrow_cannot_open_names_the_flag():
    with pytest.raises(UserError, match="--shards nosuchscheme://x/y: not a storage URI pyarrow can open"):
        check_bucket("nosuchscheme://x/y", what="--shards", write=False)
