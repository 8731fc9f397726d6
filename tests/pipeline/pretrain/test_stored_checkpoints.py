"""Which checkpoints storage really holds whole (`pipeline.pretrain.stored_checkpoints`): an upload the
store cut short leaves a folder Ray registers all the same; and a checkpoint's path named as a URI."""

from __future__ import annotations

import pyarrow.fs as pafs

from pipeline.pretrain.stored_checkpoints import as_uri, missing_files
from pipeline.storage.checkpoint_copy import copy_up
from tests.pipeline.test_checkpoint_integrity import _write_checkpoint


def test_a_checkpoint_missing_an_uploaded_file_is_named_and_a_whole_one_is_not(bucket_env, tmp_path):
    local = tmp_path / "checkpoint_step_00000006"
    _write_checkpoint(local, step=6)
    copy_up(local, bucket_env.uri("stored/whole/checkpoint_step_00000006"), what="--storage-path")
    (local / "train_state.pt").unlink()
    copy_up(local, bucket_env.uri("stored/cut/checkpoint_step_00000006"), what="--storage-path")
    filesystem, root = pafs.FileSystem.from_uri(bucket_env.uri("stored"))
    assert missing_files(f"{root}/whole/checkpoint_step_00000006", filesystem) == []
    assert missing_files(f"{root}/cut/checkpoint_step_00000006", filesystem) == ["train_state.pt"]
    assert missing_files(f"{root}/never/checkpoint_step_00000006", filesystem) == ["model.json"]


def test_a_bucket_checkpoint_is_named_with_the_scheme_and_endpoint_of_the_storage_path():
    storage = "s3://data/ray_results?endpoint_override=127.0.0.1:9000&scheme=http"
    assert as_uri("data/ray_results/run/checkpoint_step_00000008", storage) == (
        "s3://data/ray_results/run/checkpoint_step_00000008?endpoint_override=127.0.0.1:9000&scheme=http"
    )
    assert as_uri("b/k", "gs://b") == "gs://b/k"
    assert as_uri("/home/u/ray_results/run/c", "/home/u/ray_results") == "/home/u/ray_results/run/c"
