"""Stores that are not AWS, and places that are not folders, found before any work.

- A store that keeps the `aws-chunked` framing of uploads (older MinIO, Ceph RGW, ...) is found by the
  write check's read-back and refused in one line naming AWS_REQUEST_CHECKSUM_CALCULATION; with it set
  to WHEN_REQUIRED the same store is usable. Before, prep ran and ended in "Parquet magic bytes not
  found in footer". Each case runs in its own process: the AWS SDK reads the variable once, at start.
- `--storage-path` naming an existing object is refused as `--output`, `--shards` and `--checkpoint`
  refuse it. Before, checkpoints went under `.../manifest.json/...`.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from pipeline.cli.errors import UserError
from pipeline.storage.bucket_check import check_bucket
from tests.conftest import REPO_ROOT
from tests.support.framing_store import framing_store

CHECK = """
import sys
from pipeline.cli.errors import UserError
from pipeline.storage.bucket_check import check_bucket
try:
    check_bucket(sys.argv[1], what="--output", write=True)
    print("usable")
except UserError as error:
    print(error)
"""


def _check_in_a_new_process(uri: str, **env: str) -> str:
    environment = {**os.environ, "AWS_ACCESS_KEY_ID": "any", "AWS_SECRET_ACCESS_KEY": "any",
                   "AWS_DEFAULT_REGION": "us-east-1", "PYTHONPATH": str(REPO_ROOT), **env}  # fmt: skip
    environment.pop("AWS_ENDPOINT_URL", None)
    done = subprocess.run([sys.executable, "-c", CHECK, uri], capture_output=True, text=True, timeout=120,
                          env=environment)  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.strip()


def test_a_store_that_keeps_the_upload_framing_is_refused_with_the_variable_to_set(tmp_path):
    with framing_store(tmp_path) as port:
        uri = f"s3://framing/shards?endpoint_override=127.0.0.1:{port}&scheme=http"
        said = _check_in_a_new_process(uri)
        assert "AWS_REQUEST_CHECKSUM_CALCULATION=WHEN_REQUIRED" in said and "aws-chunked framing" in said, said
        assert said.count("\n") == 0  # one line
        assert _check_in_a_new_process(uri, AWS_REQUEST_CHECKSUM_CALCULATION="WHEN_REQUIRED") == "usable"


def test_a_storage_path_naming_an_object_is_refused(bucket_env):
    bucket_env.client().put_object(Bucket=bucket_env.bucket, Key="runs/manifest.json", Body=b"{}")
    with pytest.raises(UserError, match=r"--storage-path s3://audioscale-data/runs/manifest.json: that is an object"):
        check_bucket(bucket_env.uri("runs/manifest.json"), what="--storage-path", write=True)
    check_bucket(bucket_env.uri("runs"), what="--storage-path", write=True)  # its prefix is fine


def test_a_store_answering_500_is_one_line_not_a_traceback(bucket_env, tmp_path, capsys):
    from cluster.rehearsal.fault_proxy import fault_proxy
    from pipeline.prep.__main__ import COMMAND, main

    with fault_proxy(bucket_env.port) as proxy:
        proxy.answer(500)
        uri = bucket_env.uri("raw/audio", port=proxy.port)
        code = COMMAND.run(main, ["--input", uri, "--output", str(tmp_path / "shards"), "--no-progress"])
    said = capsys.readouterr().err.strip()
    assert code == 2 and "\n" not in said and "Traceback" not in said
    assert (
        said.startswith("python -m pipeline.prep: error: --input s3://audioscale-data/raw/audio") and "500" in said
    ), said
