"""Long inputs split into time ranges: the same rows as an unsplit read, and the same accounting."""

from __future__ import annotations

import numpy as np
import pyarrow.parquet as pq
import pytest
import soundfile

from pipeline.audio.frontend import get_preset
from pipeline.audio.inputs import InputFile, list_inputs
from pipeline.audio.segments import FileOutcome, featurize_file
from pipeline.prep.ranges import combine_item_outcomes, plan_work_items
from pipeline.prep.run import PrepConfig, run_prep
from pipeline.shards.format import (
    part_files,
    read_manifest,
    read_shard_table,
    segments_to_table,
)
from tests.support.prep_helpers import SR, tone

PRESET = get_preset("audiomae")
LONG_RATE_HZ = 8_000
# 15 ten-second segments per range: the 12-minute file (72 segments) becomes 5 ranges, the
# 4-minute files (24 segments) 2 ranges.
TEST_RANGE_S = 150.0


def write_long_corpus(root):
    root.mkdir()
    soundfile.write(root / "long_12min.flac", tone(720.0, LONG_RATE_HZ, amplitude=0.05), LONG_RATE_HZ, subtype="PCM_16")
    nan_late = tone(240.0, LONG_RATE_HZ)
    nan_late[200 * LONG_RATE_HZ] = np.nan  # inside the second range (150 s onwards)
    soundfile.write(root / "nan_at_200s.wav", nan_late, LONG_RATE_HZ, subtype="FLOAT")
    soundfile.write(
        root / "all_nan.wav", np.full(240 * LONG_RATE_HZ, np.nan, np.float32), LONG_RATE_HZ, subtype="FLOAT"
    )
    soundfile.write(root / "short.wav", tone(3.0), SR)
    return root


@pytest.fixture(scope="module")
def split_run(ray_local, tmp_path_factory):
    base = tmp_path_factory.mktemp("ranges")
    audio = write_long_corpus(base / "audio")
    config = PrepConfig(
        input_path=audio, output_dir=base / "shards", segment_s=10.0, show_progress=False, max_range_s=TEST_RANGE_S
    )
    return config, run_prep(config)


def unsplit_table(path, source):
    """The rows a single whole-file read makes, built without Ray."""
    segments = list(featurize_file(path, PRESET, 10.0, FileOutcome()))
    return segments_to_table([(source, None, None, segment) for segment in segments], PRESET.n_mels)


def test_plan_splits_only_long_files_into_whole_segment_ranges(tmp_path):
    audio = write_long_corpus(tmp_path / "audio")
    inputs = list_inputs(audio).inputs
    items = plan_work_items(inputs, segment_s=10.0, max_range_s=TEST_RANGE_S)
    long_items = [item for item in items if item.input.source == "long_12min.flac"]
    assert [(i.first_segment, i.max_segments) for i in long_items] == [
        (0, 15),
        (15, 15),
        (30, 15),
        (45, 15),
        (60, None),
    ]
    assert {i.num_ranges for i in long_items} == {5} and [i.range_index for i in long_items] == list(range(5))
    size = next(i.size_bytes for i in inputs if i.source == "long_12min.flac")
    assert sum(i.size_bytes for i in long_items) == pytest.approx(size)
    short = [item for item in items if item.input.source == "short.wav"]
    assert len(short) == 1 and short[0].max_segments is None
    assert len(items) == 5 + 2 + 2 + 1
    # Same files, default range size: nothing is split.
    assert len(plan_work_items(inputs, segment_s=10.0)) == len(inputs)


def test_an_unreadable_large_file_stays_one_item_for_the_worker_to_reject(tmp_path):
    (tmp_path / "noise.wav").write_bytes(np.random.default_rng(0).bytes(400_000))
    item = InputFile(path=str(tmp_path / "noise.wav"), source="noise.wav", size_bytes=400_000)
    assert [(i.first_segment, i.max_segments) for i in plan_work_items([item], segment_s=10.0, max_range_s=20.0)] == [
        (0, None)
    ]


def test_a_range_yields_exactly_the_whole_reads_segments_there(tmp_path):
    soundfile.write(tmp_path / "a.wav", tone(65.0, 22_050), 22_050)
    whole = list(featurize_file(tmp_path / "a.wav", PRESET, 10.0, FileOutcome()))
    middle = list(featurize_file(tmp_path / "a.wav", PRESET, 10.0, FileOutcome(), first_segment=2, max_segments=3))
    assert [s.index for s in middle] == [2, 3, 4] and [s.offset_s for s in middle] == [20.0, 30.0, 40.0]
    for part, full in zip(middle, whole[2:5]):
        np.testing.assert_array_equal(part.mel, full.mel)
    beyond = FileOutcome()
    assert list(featurize_file(tmp_path / "a.wav", PRESET, 10.0, beyond, first_segment=9)) == []
    assert beyond.rejection_reason is None and beyond.num_segments == 0


def outcome(range_index, start_s, segments=0, **fields):
    base = {
        "range_index": range_index,
        "range_start_s": start_s,
        "num_segments": segments,
        "audio_s": 10.0 * segments,
        "dropped_tail_s": 0.0,
        "rejection_kind": None,
        "rejection_reason": None,
        "partial_reason": None,
    }
    return {**base, **fields}


def test_a_split_file_with_a_missing_report_keeps_its_rows_and_is_partial():
    verdict = combine_item_outcomes("x.wav", {0: outcome(0, 0.0, segments=15)}, num_ranges=2)
    assert verdict.rejected is None and verdict.audio_s == 150.0
    assert verdict.partial == {
        "path": "x.wav",
        "decoded_s": 150.0,
        "reason": "no report (a worker failed?); re-run (time range 2 of 2)",
    }


def test_split_run_gives_the_unsplit_rows_in_order(split_run):
    config, result = split_run
    assert result.exit_code == 0
    # Two items per task here (10 items, 2 CPUs): the long file's 5 ranges land in 3 tasks' parts.
    parts_with_long = [
        path
        for path in part_files(config.output_dir)
        if "long_12min.flac" in pq.read_table(path, columns=["source"])["source"].to_pylist()
    ]
    assert len(parts_with_long) == 3
    table = read_shard_table(config.output_dir)
    rows = table.filter(np.asarray(table["source"]) == "long_12min.flac")
    expected = unsplit_table(config.input_path / "long_12min.flac", "long_12min.flac")
    assert rows.num_rows == expected.num_rows == 72
    assert rows.select(["clip_id", "segment_index", "offset_s", "duration_s", "num_frames"]).equals(
        expected.select(["clip_id", "segment_index", "offset_s", "duration_s", "num_frames"])
    )
    assert rows["mel"].equals(expected["mel"]) and rows["mel_bin_sum"].equals(expected["mel_bin_sum"])


def test_split_run_accounts_for_every_file_like_an_unsplit_run(split_run):
    config, result = split_run
    manifest = read_manifest(config.output_dir)
    # 72 + 15 (the first range of nan_at_200s) + 1 rows; all_nan has none in either range.
    assert (manifest["num_inputs"], manifest["num_rows"], manifest["num_rejected"]) == (4, 88, 1)
    assert manifest["total_hours"] == pytest.approx((720.0 + 150.0 + 3.0) / 3600)
    assert manifest["rejected_by_kind"] == {"non-finite samples": 1}
    [partial] = manifest["partial_inputs"]
    assert partial["path"] == "nan_at_200s.wav" and partial["decoded_s"] == pytest.approx(150.0)
    assert "NaN" in partial["reason"] and "time range from 150 s" in partial["reason"]
    sources = set(read_shard_table(config.output_dir, columns=["source"])["source"].to_pylist())
    assert sources == {"long_12min.flac", "nan_at_200s.wav", "short.wav"}


def test_rerun_with_another_range_size_reuses_the_output(split_run):
    config, result = split_run
    again = run_prep(
        PrepConfig(input_path=config.input_path, output_dir=config.output_dir, segment_s=10.0, show_progress=False)
    )
    assert again.reused and again.manifest["fingerprint"] == result.manifest["fingerprint"]
