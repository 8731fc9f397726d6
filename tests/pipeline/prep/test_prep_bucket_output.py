"""Prep's output folder in a bucket: the same decisions as on disk (reuse, conflict, clear only prep's
files), every file through pyarrow's S3 filesystem, against a real signed store on loopback. Before,
`--output s3://...` went through a local path join and wrote a folder named `s3:` in the working
directory. The whole prep into a bucket, through Ray Data, runs in the cluster rehearsal."""

from __future__ import annotations

import json

import pytest

from pipeline.prep.output import OutputConflictError, clear_output_dir, prepare_output_dir, write_manifest
from pipeline.prep.run import PrepConfig
from pipeline.shards.format import read_manifest


def _put(store, key: str, body: bytes = b"x") -> None:
    store.client().put_object(Bucket=store.bucket, Key=key, Body=body)


def test_a_bucket_output_stays_a_uri_and_a_folder_becomes_absolute(bucket_env, tmp_path, monkeypatch):
    uri = bucket_env.uri("shards/a")
    assert PrepConfig(input_path=tmp_path, output_dir=uri).output_dir == uri
    monkeypatch.chdir(tmp_path)
    assert PrepConfig(input_path=tmp_path, output_dir="out").output_dir == tmp_path / "out"


def test_an_empty_prefix_is_ready_and_a_finished_run_is_reused(bucket_env):
    uri = bucket_env.uri("shards/reuse")
    assert prepare_output_dir(uri, fingerprint="f1", settings={}, overwrite=False) is False
    write_manifest(uri, {"fingerprint": "f1", "part_files": [], "format_version": 99, "settings": {}})
    assert read_manifest(uri)["fingerprint"] == "f1"
    assert prepare_output_dir(uri, fingerprint="f1", settings={}, overwrite=False) is True
    assert not [key for key in bucket_env.keys("shards/reuse/") if key.endswith(".tmp")]  # one PUT, no temp file


def test_other_settings_are_a_conflict_and_foreign_files_are_never_cleared(bucket_env):
    uri = bucket_env.uri("shards/conflict")
    write_manifest(uri, {"fingerprint": "old", "part_files": [], "settings": {"preset": "dasheng"}})
    with pytest.raises(OutputConflictError, match=r"settings differ \(preset\)"):
        prepare_output_dir(uri, fingerprint="new", settings={"preset": "audiomae"}, overwrite=False)
    _put(bucket_env, "shards/foreign/notes.txt")
    with pytest.raises(OutputConflictError, match="holds files that are not mel shards"):
        prepare_output_dir(bucket_env.uri("shards/foreign"), fingerprint="f", settings={}, overwrite=False)
    assert "shards/foreign/notes.txt" in bucket_env.keys("shards/foreign/")


def test_clearing_removes_only_what_prep_writes(bucket_env):
    for name in ("part-00000-a.parquet", "part-00001-a.parquet", "manifest.json", "rejected.jsonl"):
        _put(bucket_env, f"shards/clear/{name}")
    _put(bucket_env, "shards/clear/targets/k100/codebook.json", json.dumps({}).encode())
    clear_output_dir(bucket_env.uri("shards/clear"))
    # pyarrow leaves a folder marker ("shards/clear/") behind when it deletes a folder's last file.
    objects = sorted(key for key in bucket_env.keys("shards/clear/") if not key.endswith("/"))
    assert objects == ["shards/clear/targets/k100/codebook.json"]
