"""Prep loses nothing and doubles nothing: one run per output folder, a file listed twice counts once,
and a finished folder is reused only when its part files still match the manifest."""

from __future__ import annotations

import json
import shutil

import pytest
from prep_helpers import labeled_shards

from pipeline.prep.run import PrepConfig, run_prep
from pipeline.shards.format import read_shard_table

pytestmark = pytest.mark.ray


@pytest.fixture()
def finished(ray_local, tmp_path_factory, tmp_path):
    """A private copy of a finished shard folder, and the config that made it."""
    original = labeled_shards(tmp_path_factory)
    shards = shutil.copytree(original, tmp_path / "shards")
    config = PrepConfig(input_path=original.parent / "audio" / "manifest.jsonl", output_dir=shards, segment_s=5.0,
                        show_progress=False)
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
