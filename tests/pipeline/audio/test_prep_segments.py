"""One file -> segments: bounded segments, dropped short tails, partial decodes, rejections."""

from __future__ import annotations

import numpy as np
import pytest
import soundfile

from pipeline.audio.frontend import get_preset
from pipeline.audio.segments import FileOutcome, featurize_file
from tests.support.prep_helpers import SR, tone

PRESET = get_preset("audiomae")


def run(path, segment_s: float = 10.0) -> tuple[list, FileOutcome]:
    outcome = FileOutcome()
    return list(featurize_file(path, PRESET, segment_s, outcome)), outcome


def test_segments_cover_the_file_in_order_with_bounded_length(tmp_path):
    soundfile.write(tmp_path / "a.wav", tone(23.0, 44_100), 44_100)
    segments, outcome = run(tmp_path / "a.wav", segment_s=10.0)
    assert [s.offset_s for s in segments] == [0.0, 10.0, 20.0]
    assert [s.mel.shape for s in segments] == [(1001, 80), (1001, 80), (301, 80)]
    assert outcome.audio_s == pytest.approx(23.0) and outcome.rejection_reason is None


def test_tail_shorter_than_a_window_is_dropped_and_counted(tmp_path):
    soundfile.write(tmp_path / "a.wav", tone(4.005), SR)  # 2 s segments leave a 5 ms tail
    segments, outcome = run(tmp_path / "a.wav", segment_s=2.0)
    assert len(segments) == 2
    assert outcome.dropped_tail_s == pytest.approx(0.005)
    assert outcome.audio_s + outcome.dropped_tail_s == pytest.approx(4.005)


def test_decoder_failure_midway_keeps_earlier_segments_and_says_so(tmp_path):
    path = tmp_path / "corrupt.mp3"
    soundfile.write(path, 0.3 * np.random.default_rng(0).standard_normal(30 * SR).astype(np.float32), SR, format="MP3")
    data = bytearray(path.read_bytes())
    middle = len(data) // 2
    data[middle : middle + 5000] = np.random.default_rng(1).bytes(5000)
    path.write_bytes(bytes(data))
    segments, outcome = run(path)
    assert 1 <= len(segments) < 3
    assert outcome.partial_reason and "decoding failed" in outcome.partial_reason
    assert outcome.rejection_reason is None


def test_featurize_reports_rather_than_raises(tmp_path):
    (tmp_path / "x.wav").write_bytes(b"RIFF" + bytes(100))
    segments, outcome = run(tmp_path / "x.wav")
    assert segments == [] and outcome.rejection_kind == "not audio"
    assert str(tmp_path / "x.wav") in outcome.rejection_reason
