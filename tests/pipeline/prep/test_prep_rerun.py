"""Manifest contents, idempotent re-runs, setting conflicts and --overwrite."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

import pipeline
from pipeline.audio.frontend import get_preset
from pipeline.prep.__main__ import COMMAND, format_summary, main
from pipeline.prep.output import OutputConflictError, prepare_output_dir
from pipeline.prep.run import PrepConfig, run_prep
from pipeline.shards.format import (
    mel_matrices,
    part_files,
    read_manifest,
    read_shard_table,
)
from tests.support.prep_helpers import labeled_shards, write_labeled_corpus


@pytest.fixture(scope="module")
def shards(ray_local, tmp_path_factory):
    return labeled_shards(tmp_path_factory)


def test_manifest_records_preset_counts_and_hours(shards):
    manifest = read_manifest(shards)
    assert manifest["preset"] == get_preset("audiomae").to_dict()
    assert manifest["n_mels"] == 80 and manifest["audioscale_version"] == pipeline.__version__
    # Clips of 3, 12.5, 1.2, 4, 2, 0.8 s cut at 5 s: the 12.5 s clip is three rows.
    assert (manifest["num_inputs"], manifest["num_rows"], manifest["num_rejected"]) == (6, 8, 0)
    assert manifest["total_hours"] == pytest.approx(23.5 / 3600)
    assert manifest["rows_by_split"] == {"test": 2, "train": 6}
    assert manifest["settings"] == {"preset": "audiomae", "segment_s": 5.0, "max_hours": None, "seed": None}
    assert len(manifest["fingerprint"]) == 64


def test_manifest_mean_and_std_match_the_stored_matrices(shards):
    manifest = read_manifest(shards)
    frames = np.concatenate(mel_matrices(read_shard_table(shards, columns=["mel"])["mel"], manifest["n_mels"])).astype(
        np.float64
    )
    np.testing.assert_allclose(manifest["mean"], frames.mean(axis=0), atol=1e-5)
    np.testing.assert_allclose(manifest["std"], frames.std(axis=0), atol=1e-4)
    assert manifest["total_frames"] == len(frames)


def test_same_inputs_and_settings_reuse_the_output(shards):
    before = {path.name: path.stat().st_mtime_ns for path in part_files(shards)}
    manifest_path = shards.parent / "audio" / "manifest.jsonl"
    result = run_prep(PrepConfig(input_path=manifest_path, output_dir=shards, segment_s=5.0, show_progress=False))
    assert result.reused and result.exit_code == 0
    assert {path.name: path.stat().st_mtime_ns for path in part_files(shards)} == before
    assert "reusing it" in format_summary(result)


def test_other_settings_into_the_same_output_are_a_clear_error(shards, capsys):
    manifest_path = shards.parent / "audio" / "manifest.jsonl"
    code = COMMAND.run(
        main, ["--input", str(manifest_path), "--output", str(shards), "--segment-s", "5", "--preset", "dasheng"]
    )
    error = capsys.readouterr().err
    assert code == 2
    assert "settings differ (preset)" in error and "--overwrite" in error


def test_changed_input_file_is_detected(shards, tmp_path):
    copy = tmp_path / "shards"
    shutil.copytree(shards, copy)
    settings = read_manifest(copy)["settings"]
    with pytest.raises(OutputConflictError, match="input files differ"):
        prepare_output_dir(copy, fingerprint="0" * 64, settings=settings, overwrite=False)


def test_overwrite_replaces_shards_made_with_other_settings(ray_local, tmp_path):
    manifest_path = write_labeled_corpus(tmp_path / "audio")
    output = tmp_path / "shards"
    run_prep(PrepConfig(input_path=manifest_path, output_dir=output, segment_s=5.0, show_progress=False))
    result = run_prep(
        PrepConfig(
            input_path=manifest_path,
            output_dir=output,
            preset_name="dasheng",
            segment_s=10.0,
            overwrite=True,
            show_progress=False,
        )
    )
    assert not result.reused
    manifest = read_manifest(output)
    assert manifest["preset"]["name"] == "dasheng" and manifest["num_rows"] == 7  # 12.5 s: two rows
    table = read_shard_table(output, columns=["mel"])
    assert table.num_rows == 7 and all(m.shape[1] == 64 for m in mel_matrices(table["mel"], 64))


def test_interrupted_output_without_manifest_is_cleared(tmp_path):
    (tmp_path / "part-00000-x.parquet").write_bytes(b"partial")
    assert prepare_output_dir(tmp_path, fingerprint="f", settings={}, overwrite=False) is False
    assert list(tmp_path.iterdir()) == []


def test_output_holding_other_files_is_refused_even_with_overwrite(tmp_path):
    (tmp_path / "thesis.tex").write_text("keep me")
    with pytest.raises(OutputConflictError, match="thesis.tex"):
        prepare_output_dir(tmp_path, fingerprint="f", settings={}, overwrite=True)
    assert (tmp_path / "thesis.tex").read_text() == "keep me"


def test_rejected_jsonl_is_empty_when_nothing_was_rejected(shards):
    assert (shards / "rejected.jsonl").read_text() == ""
    assert json.loads((shards / "manifest.json").read_text())["rejected_by_kind"] == {}


def test_max_hours_prepares_the_seeded_subset_and_records_it(ray_local, tmp_path):
    from pipeline.audio.inputs import list_inputs, select_subset_hours

    manifest_path = write_labeled_corpus(tmp_path / "audio")
    budget_hours = 6.0 / 3600
    result = run_prep(
        PrepConfig(
            input_path=manifest_path,
            output_dir=tmp_path / "shards",
            max_hours=budget_hours,
            seed=4,
            show_progress=False,
        )
    )
    subset = select_subset_hours(list_inputs(manifest_path).inputs, max_hours=budget_hours, seed=4)
    expected = {i.source for i in subset}
    assert set(read_shard_table(tmp_path / "shards", columns=["source"])["source"].to_pylist()) == expected
    assert result.manifest["num_listed_inputs"] == 6 and result.manifest["num_inputs"] == len(expected) < 6
    assert result.manifest["settings"]["max_hours"] == budget_hours and result.manifest["settings"]["seed"] == 4
