"""Shards read back without Ray (pyarrow, pandas) and through the training crop reader."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
import soundfile

from pipeline.audio.frontend import compute_log_mel, get_preset, load_audio, normalize_clip, to_mono_16k
from pipeline.shards.crops import (
    CropBatch,
    clip_keys,
    count_short_segments,
    crop_or_pad,
    crop_starts,
    read_crops,
)
from pipeline.shards.format import (
    mel_from_row,
    part_files,
    read_manifest,
    read_shard_table,
)
from tests.support.prep_helpers import labeled_shards


@pytest.fixture(scope="module")
def shards(ray_local, tmp_path_factory):
    return labeled_shards(tmp_path_factory)


def expected_segment_mel(shards, source: str, offset_s: float, duration_s: float) -> np.ndarray:
    wave, rate = load_audio(shards.parent / "audio" / source)
    start = int(round(offset_s * rate))
    segment = wave[start : start + int(round(duration_s * rate))]
    return compute_log_mel(to_mono_16k(segment, rate), get_preset("audiomae"))


def test_plain_pyarrow_reads_rows_that_match_the_front_end(shards):
    table = pq.read_table(part_files(shards)[0])
    row = table.slice(0, 1).to_pylist()[0]
    mel = mel_from_row(row)
    assert mel.shape == (row["num_frames"], 80) and mel.dtype == np.float32
    expected = expected_segment_mel(shards, row["source"], row["offset_s"], row["duration_s"])
    np.testing.assert_allclose(mel, expected, atol=0.01, rtol=2e-3)  # float16 storage


def test_pandas_reads_every_part_with_labels_and_splits(shards):
    frame = pd.concat([pd.read_parquet(path) for path in part_files(shards)], ignore_index=True)
    assert len(frame) == 8
    long_clip = frame[frame["source"] == "clip_1.wav"].sort_values("offset_s")
    assert list(long_clip["offset_s"]) == [0.0, 5.0, 10.0]
    assert list(long_clip["num_frames"]) == [501, 501, 251]
    assert set(long_clip["label"]) == {"cat"} and set(long_clip["split"]) == {"train"}
    mel = mel_from_row(long_clip.iloc[2])
    assert mel.shape == (251, 80)
    expected = expected_segment_mel(shards, "clip_1.wav", 10.0, 2.5)
    np.testing.assert_allclose(mel, expected, atol=0.01, rtol=2e-3)


def test_read_shard_table_selects_columns(shards):
    table = read_shard_table(shards, columns=["clip_id", "num_frames"])
    assert table.column_names == ["clip_id", "num_frames"] and table.num_rows == 8
    assert len(set(table["clip_id"].to_pylist())) == 8


def test_read_manifest_of_a_plain_folder_says_how_to_make_shards(tmp_path):
    with pytest.raises(FileNotFoundError, match="python -m pipeline.prep"):
        read_manifest(tmp_path)


def test_crop_or_pad_pads_short_input_with_its_minimum():
    mel = np.arange(30, dtype=np.float32).reshape(10, 3)  # (frames, n_mels), minimum 0
    cropped = crop_or_pad(mel, 16, np.random.default_rng(0))
    assert cropped.shape == (16, 3)
    np.testing.assert_array_equal(cropped[:10], mel)
    assert np.all(cropped[10:] == 0.0)


def test_crop_or_pad_takes_a_contiguous_window_of_long_input():
    mel = np.repeat(np.arange(100, dtype=np.float32)[:, None], 2, axis=1)
    cropped = crop_or_pad(mel, 20, np.random.default_rng(5))
    start = int(cropped[0, 0])
    np.testing.assert_array_equal(cropped[:, 0], np.arange(start, start + 20))


def crop_udf(seed: int, crop_frames: int = 100, per_clip: bool = True, **overrides) -> CropBatch:
    settings = dict(
        crop_frames=crop_frames,
        min_frames=crop_frames // 2,
        seed=seed,
        n_mels=80,
        split=None,
        per_clip=per_clip,
        bin_mean=None,
        bin_std=None,
    )
    return CropBatch(**{**settings, **overrides})


def test_crops_are_reproducible_per_seed_whatever_the_row_order(shards):
    table = read_shard_table(shards)
    reversed_table = table.take(list(range(table.num_rows))[::-1])
    forward, backward = crop_udf(seed=7)(table)["mel"], crop_udf(seed=7)(reversed_table)["mel"]
    np.testing.assert_array_equal(forward, backward[::-1])
    assert not np.array_equal(forward, crop_udf(seed=8)(table)["mel"])


def test_split_selects_rows(shards):
    table = read_shard_table(shards)
    assert len(crop_udf(seed=0, crop_frames=150, split="test")(table)["mel"]) == 2


def test_short_segments_below_min_frames_are_skipped_and_counted(shards):
    # Frames per row: 301, 501, 501, 251, 121, 401, 201, 81; four rows are below 300.
    assert count_short_segments(shards, crop_frames=600, min_frames=300) == 4
    crops = crop_udf(seed=0, crop_frames=600, min_frames=300)(read_shard_table(shards))["mel"]
    assert crops.shape == (4, 600, 80)


def test_per_clip_normalisation_is_applied_before_padding(shards):
    table = read_shard_table(shards)
    table = table.filter(np.asarray(table["num_frames"]) == 501)
    # The crop is longer than the segment, so it holds the whole normalised segment, then padding.
    crops = crop_udf(seed=0, crop_frames=600, min_frames=1)(table)["mel"]
    whole = crops[:, :501]
    assert np.abs(whole.mean(axis=(1, 2))).max() < 1e-4
    np.testing.assert_allclose(whole.std(axis=(1, 2)), 1.0, atol=1e-3)
    np.testing.assert_array_equal(
        crops[:, 501:], np.broadcast_to(whole.min(axis=(1, 2))[:, None, None], crops[:, 501:].shape)
    )


def test_dataset_level_normalisation_for_presets_without_per_clip(shards):
    table = read_shard_table(shards).slice(0, 3)
    mean, std = np.full(80, 2.0, np.float32), np.full(80, 4.0, np.float32)
    udf = crop_udf(seed=0, crop_frames=50, per_clip=False, bin_mean=mean, bin_std=std)
    raw = crop_udf(seed=0, crop_frames=50, per_clip=False)
    np.testing.assert_allclose(udf(table)["mel"], (raw(table)["mel"] - 2.0) / 4.0, rtol=1e-5, atol=1e-5)


def test_stereo_source_rows_equal_the_mono_mean(tmp_path):
    left = np.sin(np.arange(16_000) / 5).astype(np.float32)
    soundfile.write(tmp_path / "s.wav", np.stack([left, np.zeros_like(left)], axis=1), 16_000, subtype="FLOAT")
    wave, _ = load_audio(tmp_path / "s.wav")
    np.testing.assert_allclose(wave, left / 2, atol=1e-7)


def test_read_crops_gives_the_first_crops_in_sorted_file_order(shards):
    in_order = np.concatenate([crop_udf(seed=3)(pq.read_table(path))["mel"] for path in part_files(shards)])
    first_five = read_crops(shards, crop_frames=100, seed=3, limit=5)
    assert first_five.dtype == np.float32 and first_five.shape == (5, 100, 80)
    np.testing.assert_array_equal(first_five, in_order[:5])
    np.testing.assert_array_equal(read_crops(shards, crop_frames=100, seed=3, limit=1000), in_order)


def test_vectorised_crops_equal_the_row_by_row_policy(shards):
    """Each crop is the window crop_starts picks of the normalised segment (frontend.normalize_clip)."""
    table = read_shard_table(shards)
    crops = crop_udf(seed=11, crop_frames=300, min_frames=1)(table)["mel"]
    frames = table["num_frames"].to_numpy()
    starts = crop_starts(clip_keys(table["clip_id"].to_pylist()), frames, 300, 11)
    for row, crop in enumerate(crops):
        segment = normalize_clip(mel_from_row(table.slice(row, 1).to_pylist()[0]))
        expected = segment[starts[row] : starts[row] + 300]
        if len(expected) < 300:
            expected = np.concatenate([expected, np.full((300 - len(expected), 80), segment.min(), np.float32)])
        np.testing.assert_allclose(crop, expected, atol=2e-4)


def test_crop_starts_cover_every_start_evenly():
    keys = clip_keys([f"clip-{i}" for i in range(20_000)])
    starts = crop_starts(keys, np.full(20_000, 104), 100, seed=5)  # 5 possible starts
    counts = np.bincount(starts, minlength=5)
    assert starts.min() == 0 and starts.max() == 4 and counts.min() > 3_800  # 4,000 each; binomial sd 57
    assert not np.array_equal(starts, crop_starts(keys, np.full(20_000, 104), 100, seed=6))
