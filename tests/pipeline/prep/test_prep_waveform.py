"""The `waveform` preset: 16 kHz samples in 20 ms frames, in the same shard contract as the mel presets,
and the crop readers that feed HuBERT / wav2vec 2.0 from it."""

from __future__ import annotations

import json

import numpy as np
import pytest
import soundfile

from pipeline.audio.frontend import compute_features, get_preset
from pipeline.prep.run import PrepConfig, run_prep
from pipeline.pretrain.data import normalise_on_device
from pipeline.rankme.pool import iter_pool_crops, select_pool
from pipeline.shards.crop_stream import CropStream, StreamPlan, StreamPosition, batches
from pipeline.shards.crops import clip_keys, crop_policy, crop_starts
from pipeline.shards.format import mel_matrices, read_manifest, read_shard_table
from tests.support.prep_helpers import SR, labeled_shards, write_labeled_corpus

PRESET = get_preset("waveform")


@pytest.fixture(scope="module")
def shards(ray_local, tmp_path_factory):
    return labeled_shards(tmp_path_factory, preset_name="waveform")


def test_a_frame_is_twenty_ms_of_samples_and_a_tail_under_one_frame_is_dropped():
    wave = np.arange(1000, dtype=np.float32)
    frames = compute_features(wave, PRESET)
    assert (PRESET.hop_samples, PRESET.n_mels, PRESET.min_samples) == (320, 320, 320)
    assert frames.shape == (3, 320) and PRESET.num_frames(1000) == 3  # 40 samples (2.5 ms) dropped
    np.testing.assert_array_equal(frames.reshape(-1), wave[:960])
    with pytest.raises(ValueError, match="shorter than one 320-sample frame"):
        compute_features(wave[:319], PRESET)


def test_manifest_records_the_preset_and_every_row_holds_its_segment_s_samples(shards):
    manifest = read_manifest(shards)
    assert manifest["preset"] == PRESET.to_dict() and manifest["preset"]["kind"] == "waveform"
    assert manifest["n_mels"] == 320 and manifest["settings"]["preset"] == "waveform"
    # The same 6 clips as the mel tests, cut at 5 s: 8 rows, 23.5 s (no clip has a tail under 20 ms).
    assert (manifest["num_inputs"], manifest["num_rows"], manifest["num_rejected"]) == (6, 8, 0)
    assert manifest["total_hours"] == pytest.approx(23.5 / 3600)
    table = read_shard_table(shards, columns=["num_frames", "duration_s"])
    np.testing.assert_array_equal(table["num_frames"].to_numpy(), (table["duration_s"].to_numpy() * 50).astype(int))


def test_stored_frames_are_the_files_samples_to_float16_precision(shards):
    source_dir = shards.parent / "audio"
    table = read_shard_table(shards, columns=["source", "segment_index", "mel"])
    matrices = mel_matrices(table["mel"], 320)
    for source, index, frames in zip(table["source"].to_pylist(), table["segment_index"].to_pylist(), matrices):
        wave, rate = soundfile.read(source_dir / source.rsplit("/", 1)[-1], dtype="float32")
        assert rate == SR
        expected = wave[index * 5 * SR :][: frames.size]
        assert frames.dtype == np.float16 and frames.size == len(expected)
        # float16 keeps 11 significant bits: |error| <= 2^-11 of each sample's magnitude (+ subnormals)
        np.testing.assert_allclose(frames.reshape(-1).astype(np.float32), expected, rtol=2**-11, atol=2**-24)


def test_every_input_is_a_row_source_or_rejected_and_subsets_nest(ray_local, tmp_path):
    corpus = write_labeled_corpus(tmp_path / "audio")
    soundfile.write(tmp_path / "audio" / "blip.wav", np.zeros(200, np.float32), SR)  # 12.5 ms: under one frame
    with (tmp_path / "audio" / "manifest.jsonl").open("a") as listing:
        listing.write(json.dumps({"path": "blip.wav", "label": "dog", "split": "train"}) + "\n")
    full = run_prep(
        PrepConfig(
            input_path=corpus, output_dir=tmp_path / "full", preset_name="waveform", segment_s=5.0, show_progress=False
        )
    ).manifest
    rejected = [json.loads(line) for line in (tmp_path / "full" / "rejected.jsonl").read_text().splitlines()]
    assert [(r["path"].rsplit("/", 1)[-1], r["kind"]) for r in rejected] == [("blip.wav", "too short")]
    sources = set(read_shard_table(tmp_path / "full", columns=["source"])["source"].to_pylist())
    assert len(sources) + full["num_rejected"] == full["num_inputs"] == 7
    subset = run_prep(
        PrepConfig(
            input_path=corpus,
            output_dir=tmp_path / "sub",
            preset_name="waveform",
            segment_s=5.0,
            max_hours=8.0 / 3600,
            seed=3,
            show_progress=False,
        )
    ).manifest
    mel_subset = run_prep(
        PrepConfig(
            input_path=corpus,
            output_dir=tmp_path / "mel-sub",
            preset_name="dasheng",
            segment_s=5.0,
            max_hours=8.0 / 3600,
            seed=3,
            show_progress=False,
        )
    ).manifest
    sub_sources = set(read_shard_table(tmp_path / "sub", columns=["source"])["source"].to_pylist())
    mel_sources = set(read_shard_table(tmp_path / "mel-sub", columns=["source"])["source"].to_pylist())
    assert sub_sources < sources and sub_sources == mel_sources  # the same seeded subset as any preset's
    assert 0 < subset["total_hours"] <= full["total_hours"] and mel_subset["num_rows"] == subset["num_rows"]


def test_training_crops_are_standardised_per_segment_and_padded_with_a_zero_sample(shards):
    policy = crop_policy(read_manifest(shards), crop_frames=200, seed=1)  # 4 s crops; rows of 0.8..5 s
    table = read_shard_table(shards)
    raw = policy.crop_raw(table)
    crops = raw.normalised()
    assert crops.shape == (8, 200, 320) and policy.waveform
    frames = table["num_frames"].to_numpy()
    starts = crop_starts(clip_keys(table["clip_id"].to_pylist()), frames, 200, 1)
    for row, segment in enumerate(mel_matrices(table["mel"], 320)):
        values = segment.astype(np.float64)
        mean, std = values.mean(), values.std()
        kept = min(frames[row], 200)
        np.testing.assert_allclose(
            crops[row, :kept], (values[starts[row] : starts[row] + kept] - mean) / std, rtol=1e-3, atol=1e-3
        )
        if kept < 200:  # padding is silence: a zero sample through the same normalisation
            np.testing.assert_allclose(crops[row, kept:], -mean / std, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(normalise_on_device(raw, "cpu").numpy(), crops, rtol=1e-6, atol=1e-6)


def test_the_stream_and_the_rankme_pool_read_waveform_shards(shards):
    plan = StreamPlan(str(shards), crop_frames=100, seed=0, rank=0, world_size=1)
    crops, _ = next(batches(CropStream(plan, window_rows=4), batch_size=4, start=StreamPosition()))
    assert crops.normalised().shape == (4, 100, 320)
    pool = select_pool(shards, crop_frames=100)
    pooled = np.concatenate(list(iter_pool_crops(pool, batch_crops=16)))
    assert pooled.shape[1:] == (100, 320) and len(pooled) == sum(count for _, count in pool.rows)
    # the 1.2 s clip (60 frames) gives one window padded with 40 frames of a zero sample, normalised
    table = read_shard_table(shards, columns=["num_frames", "mel"])
    short = mel_matrices(table["mel"], 320)[list(table["num_frames"].to_numpy()).index(60)].astype(np.float64)
    padded = [crop for crop in pooled if np.allclose(crop[:60], (short - short.mean()) / short.std(), atol=1e-3)]
    assert len(padded) == 1
    np.testing.assert_allclose(padded[0][60:], -short.mean() / short.std(), rtol=1e-4, atol=1e-5)
