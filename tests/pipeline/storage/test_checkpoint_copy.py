"""Checkpoints in a bucket read as local folders (`pipeline.storage.checkpoint_copy`) and the resume choice
made in a bucket (`pipeline.pretrain.resume`), against a real signed store on loopback."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pyarrow.fs as pafs
import pytest

from pipeline.checkpoint import read_checkpoint_meta, verify_checkpoint
from pipeline.cli.errors import UserError
from pipeline.pretrain.resume import announce_resume_point, resume_directory
from pipeline.storage.checkpoint_copy import copy_up, local_checkpoint
from tests.pipeline.test_checkpoint_integrity import _truncate, _write_checkpoint


def _upload_run(store, tmp_path: Path, run: str, *, truncate_newest: bool) -> None:
    for step in (3, 6):
        local = tmp_path / run / f"checkpoint_step_{step:08d}"
        _write_checkpoint(local, step=step, seed=step)
        if truncate_newest and step == 6:
            _truncate(local / "model.safetensors")
        copy_up(local, store.uri(f"runs/{run}/{local.name}"), what="--storage-path")


def test_a_bucket_checkpoint_is_copied_down_whole_and_verifies(bucket_env, tmp_path):
    _upload_run(bucket_env, tmp_path, "whole", truncate_newest=False)
    with local_checkpoint(bucket_env.uri("runs/whole/checkpoint_step_00000006")) as local:
        verify_checkpoint(local)  # pyarrow made no local folder for the files: this failed before
        assert read_checkpoint_meta(local)["step"] == 6
    assert not local.exists()


def test_a_missing_bucket_checkpoint_is_one_line(bucket_env):
    with pytest.raises(UserError, match="--checkpoint s3://.*/runs/none: no checkpoint folder there"):
        with local_checkpoint(bucket_env.uri("runs/none")):
            pass


def test_a_rerun_in_a_bucket_says_which_checkpoint_it_skips_and_resumes_the_earlier_one(bucket_env, tmp_path):
    _upload_run(bucket_env, tmp_path, "cut", truncate_newest=True)
    said: list[str] = []
    announce_resume_point(bucket_env.uri("runs"), "cut", say=said.append)
    assert len(said) == 2, said
    assert "skipping checkpoint" in said[0] and "checkpoint_step_00000006" in said[0] and "damaged" in said[0]
    assert "resuming from" in said[1] and "checkpoint_step_00000003" in said[1]
    filesystem, path = pafs.FileSystem.from_uri(bucket_env.uri("runs/cut/checkpoint_step_00000006"))
    with resume_directory(SimpleNamespace(path=path, filesystem=filesystem), say=lambda line: None) as chosen:
        assert read_checkpoint_meta(chosen)["step"] == 3


def test_the_drivers_bucket_check_reads_sizes_not_the_weights(bucket_env, tmp_path, monkeypatch):
    """A run's checkpoints in a bucket are judged by one listing and model.json: nothing is copied
    down (an 8.5 GB checkpoint would be, twice), and a cut upload is still caught by its size."""
    import pipeline.pretrain.resume as resume

    _upload_run(bucket_env, tmp_path, "sized", truncate_newest=True)
    copied: list[str] = []
    monkeypatch.setattr(resume, "copy_down", lambda path, *args: copied.append(path))
    said: list[str] = []
    announce_resume_point(bucket_env.uri("runs"), "sized", say=said.append)
    assert copied == []
    assert "model.safetensors is damaged:" in said[0] and "bytes in storage" in said[0]
    assert "checkpoint_step_00000003" in said[1]
