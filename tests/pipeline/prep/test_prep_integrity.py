"""Prep loses nothing and doubles nothing: one run per output folder, a file listed twice counts once,
and a finished folder is reused only when its part files still match the manifest."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest
import soundfile

from pipeline.prep.__main__ import format_summary
from pipeline.prep.run import PrepConfig, run_prep
from pipeline.shards.format import read_manifest, read_shard_table
from tests.conftest import REPO_ROOT
from tests.support.prep_helpers import SR, labeled_shards, tone

pytestmark = pytest.mark.ray


def _three_clips(folder):
    folder.mkdir(parents=True, exist_ok=True)
    for index in range(3):
        soundfile.write(folder / f"clip{index}.wav", tone(1.0 + index, freq_hz=300 + 100 * index, seed=index), SR)


@pytest.mark.slow
def test_two_concurrent_preps_into_one_folder_write_the_rows_once(tmp_path):
    _three_clips(tmp_path / "audio")
    command = [
        sys.executable,
        "-m",
        "pipeline.prep",
        "--input",
        str(tmp_path / "audio"),
        "--output",
        str(tmp_path / "shards"),
        "--no-progress",
    ]
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    runs = [
        subprocess.Popen(command, cwd=REPO_ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    outputs = [run.communicate(timeout=600) for run in runs]
    assert [run.returncode for run in runs] == [0, 0], outputs
    # One run made the shards, the other waited for it and reused them.
    assert sum("waiting for the prep run writing to" in err for _, err in outputs) == 1, outputs
    assert sum("reusing it" in out for out, _ in outputs) == 1, outputs
    manifest = read_manifest(tmp_path / "shards")
    assert manifest["num_rows"] == read_shard_table(tmp_path / "shards").num_rows == 3
    assert len(list((tmp_path / "shards").glob("part-*.parquet"))) == len(manifest["part_files"])


def test_a_file_named_three_ways_is_one_input(ray_local, tmp_path):
    _three_clips(tmp_path / "audio")
    listing = tmp_path / "audio" / "list.csv"
    absolute = tmp_path / "audio" / "clip0.wav"
    listing.write_text(f"path\nclip0.wav\n./clip0.wav\n{absolute}\nclip1.wav\n")
    result = run_prep(
        PrepConfig(input_path=listing, output_dir=tmp_path / "shards", segment_s=5.0, show_progress=False)
    )
    manifest = result.manifest
    assert (manifest["num_rows"], manifest["total_hours"] * 3600) == (2, pytest.approx(3.0))
    assert [d["path"] for d in manifest["duplicate_inputs"]] == ["./clip0.wav", str(absolute)]
    assert all("entry 1 ('clip0.wav', the same file)" in d["reason"] for d in manifest["duplicate_inputs"])
    assert "warning: 2 inputs name a file already listed and count once: './clip0.wav'" in format_summary(result)


def test_a_linked_file_in_a_directory_is_one_input(tmp_path):
    from pipeline.audio.inputs import list_inputs

    _three_clips(tmp_path)
    os.symlink("clip0.wav", tmp_path / "alias.wav")
    inputs = list_inputs(tmp_path).inputs
    assert [(i.source, i.problem_kind) for i in inputs] == [
        ("alias.wav", None),
        ("clip0.wav", "duplicate entry"),
        ("clip1.wav", None),
        ("clip2.wav", None),
    ]


@pytest.fixture()
def finished(ray_local, tmp_path_factory, tmp_path):
    """A private copy of a finished shard folder, and the config that made it."""
    original = labeled_shards(tmp_path_factory)
    shards = shutil.copytree(original, tmp_path / "shards")
    config = PrepConfig(
        input_path=original.parent / "audio" / "manifest.jsonl", output_dir=shards, segment_s=5.0, show_progress=False
    )
    return shards, config


def test_an_old_manifest_is_made_again_not_reused(finished, capsys):
    shards, config = finished
    manifest = json.loads((shards / "manifest.json").read_text())
    manifest["part_files"] = [record["name"] for record in manifest["part_files"]]  # before checksums
    (shards / "manifest.json").write_text(json.dumps(manifest))
    result = run_prep(config)
    assert not result.reused and isinstance(result.manifest["part_files"][0], dict)
    assert "lists no part-file checksums; making it again" in capsys.readouterr().err
    assert read_shard_table(shards).num_rows == result.manifest["num_rows"] == 8


def test_a_folder_with_a_deleted_part_is_made_again_not_reused(finished, capsys):
    shards, config = finished
    victim = sorted(shards.glob("part-*.parquet"))[0]
    victim.unlink()
    result = run_prep(config)
    assert not result.reused and result.manifest["num_rows"] == 8
    assert f"{victim.name} is missing" in capsys.readouterr().err
