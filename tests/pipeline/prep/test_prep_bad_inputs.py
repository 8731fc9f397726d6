"""The prep stage on a folder of every bad input the issue lists: nothing crashes, nothing is lost."""

from __future__ import annotations

import numpy as np
import pytest

from pipeline.prep.__main__ import COMMAND, format_summary, main
from pipeline.prep.run import PrepConfig, run_prep
from pipeline.shards.format import mel_from_row, read_rejected, read_shard_table
from tests.support.prep_helpers import write_bad_inputs


@pytest.fixture(scope="module")
def bad_run(ray_local, tmp_path_factory):
    base = tmp_path_factory.mktemp("bad_inputs")
    expected = write_bad_inputs(base / "audio")
    result = run_prep(PrepConfig(input_path=base / "audio", output_dir=base / "shards", show_progress=False))
    table = read_shard_table(base / "shards", columns=["source", "offset_s", "duration_s", "num_frames", "mel"])
    return expected, result, table, read_rejected(base / "shards")


def test_every_input_is_a_row_source_or_rejected_never_both(bad_run):
    expected, _, table, rejected = bad_run
    sources = set(table["source"].to_pylist())
    rejected_paths = [record["path"] for record in rejected]
    assert len(rejected_paths) == len(set(rejected_paths))
    assert sources.isdisjoint(rejected_paths)
    assert sources | set(rejected_paths) == set(expected)


def test_each_bad_input_gets_the_expected_outcome(bad_run):
    expected, _, table, rejected = bad_run
    outcome = {source: "rows" for source in table["source"].to_pylist()}
    outcome.update({record["path"]: record["kind"] for record in rejected})
    assert outcome == expected


def test_rejections_carry_a_readable_reason(bad_run):
    _, _, _, rejected = bad_run
    reasons = {record["path"]: record["reason"] for record in rejected}
    assert "0 bytes" in reasons["empty.wav"]
    assert "16000 NaN" in reasons["all_nan.wav"]
    assert "10 inf" in reasons["partly_inf.wav"]
    assert "5.0 ms" in reasons["clip_5ms.wav"]
    assert "not readable as audio" in reasons["text.wav"]
    assert "broken symlink" in reasons["dangling_link.wav"]
    assert reasons["caf\\xe9.wav"].startswith("the file name is not valid UTF-8; rename it")


def test_silence_becomes_rows_and_is_named_as_silence(bad_run):
    _, result, table, _ = bad_run
    manifest = result.manifest
    assert manifest["silent_inputs"] == [{"path": "silence.wav", "silent_s": 2.0}]
    assert manifest["silent_hours"] == pytest.approx(2.0 / 3600)
    assert "silence.wav" in table["source"].to_pylist()  # still rows: silence is audio, just useless
    summary = format_summary(result)
    assert "h is silence (every sample under -70 dBFS) and trains nothing: 'silence.wav' (2 s)" in summary


def test_twelve_minute_file_becomes_72_ten_second_rows(bad_run):
    _, _, table, _ = bad_run
    rows = table.filter(np.array([s == "long_12min.flac" for s in table["source"].to_pylist()]))
    assert rows.num_rows == 72
    assert sorted(rows["offset_s"].to_pylist()) == pytest.approx([10.0 * i for i in range(72)])
    assert set(rows["num_frames"].to_pylist()) == {1001}


@pytest.mark.parametrize(
    "source,duration_s",
    [
        ("truncated.wav", 1.5),
        ("stereo_48k.wav", 1.5),
        ("mono_8k.wav", 1.5),
        ("tone.mp3", 2.0),
        ("tone.ogg", 2.0),
        ("pcm_u8.wav", 1.0),
        ("pcm_24.wav", 1.0),
        ("float32.wav", 1.0),
        ("nested/deeper/Grüße 日本語 é.wav", 1.0),
    ],
)
def test_decodable_inputs_keep_their_duration_and_frame_count(bad_run, source, duration_s):
    _, _, table, _ = bad_run
    row = table.filter(np.array([s == source for s in table["source"].to_pylist()])).to_pylist()
    assert len(row) == 1
    # mp3 frames carry encoder padding, hence the loose tolerance.
    assert row[0]["duration_s"] == pytest.approx(duration_s, abs=0.06)
    assert row[0]["num_frames"] == 1 + int(round(row[0]["duration_s"] * 16_000)) // 160


def test_silence_gives_the_log_floor_not_nan(bad_run):
    _, _, table, _ = bad_run
    row = table.filter(np.array([s == "silence.wav" for s in table["source"].to_pylist()])).to_pylist()[0]
    mel = mel_from_row(row)
    assert mel.shape == (row["num_frames"], 80) and np.allclose(mel, np.float16(np.log(1e-6)))


def test_symlink_loop_is_walked_once_and_reported(bad_run):
    _, result, table, _ = bad_run
    assert result.manifest["skipped_symlink_loops"] == ["nested/loop_to_parent"]
    assert not any(s.startswith("nested/loop_to_parent") for s in table["source"].to_pylist())
    assert result.manifest["skipped_non_audio_files"] == 1


def test_summary_counts_rejections_by_kind(bad_run):
    _, result, _, rejected = bad_run
    summary = format_summary(result)
    assert f"rejected {len(rejected)}: " in summary
    assert "2 non-finite samples" in summary and "2 zero-length" in summary
    assert result.exit_code == 0


def test_exit_status_is_one_when_no_input_produces_rows(ray_local, tmp_path, capsys):
    (tmp_path / "audio").mkdir()
    (tmp_path / "audio" / "empty.wav").write_bytes(b"")
    (tmp_path / "audio" / "text.wav").write_text("not audio")
    assert main(["--input", str(tmp_path / "audio"), "--output", str(tmp_path / "out"), "--no-progress"]) == 1
    assert "no input produced rows" in capsys.readouterr().out
    assert {r["path"] for r in read_rejected(tmp_path / "out")} == {"empty.wav", "text.wav"}


def test_exit_status_is_two_for_a_missing_input(tmp_path, capsys):
    assert COMMAND.run(main, ["--input", str(tmp_path / "nowhere"), "--output", str(tmp_path / "out")]) == 2
    assert "does not exist" in capsys.readouterr().err
