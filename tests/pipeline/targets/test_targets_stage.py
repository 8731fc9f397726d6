"""The k-means target stage on a tiny waveform shard set of real speech: the codebook it writes,
its manifest, the cache, and the errors a user can cause."""

from __future__ import annotations

import json

import numpy as np
import pytest

from models.wave.hubert_codebook import CENTROIDS_NAME, CodebookError, read_codebook
from pipeline.prep.output import prepare_output_dir
from pipeline.targets import ensure_codebook
from pipeline.targets.__main__ import COMMAND, main
from pipeline.targets.features import crop_features
from pipeline.targets.kmeans import TooFewFramesError
from pipeline.targets.sample import NotWaveformShardsError, read_sample_crops
from pipeline.targets.settings import TargetSettings
from tests.support.speech_waveform_shards import write_speech_waveform_shards
from tests.support.waveform_pool_fixtures import write_audio_shards

SMALL = {"clusters": 8, "crop_frames": 100, "sample_fraction": 1.0}  # 6 rows of speech -> 6 crops of 2 s


@pytest.fixture(scope="module")
def speech_shards(tmp_path_factory):
    return write_speech_waveform_shards(tmp_path_factory.mktemp("speech-waveform"))


@pytest.fixture(scope="module")
def fitted(speech_shards, tmp_path_factory):
    """(codebook dir, progress lines) of one fit, shared by the tests that only read it."""
    lines: list[str] = []
    directory = ensure_codebook(speech_shards, cache_dir=tmp_path_factory.mktemp("cache"), log=lines.append, **SMALL)
    return directory, lines


def test_codebook_manifest_records_the_fit(speech_shards, fitted):
    codebook = read_codebook(fitted[0])
    manifest = codebook.manifest
    assert codebook.centroids.shape == (8, 39) and codebook.centroids.dtype == np.float32
    assert manifest["shards"]["fingerprint"] == json.loads((speech_shards / "manifest.json").read_text())["fingerprint"]
    assert manifest["features"]["kind"] == "mfcc" and manifest["feature_dim"] == 39
    # 6 segment rows (3 s segments and tails, 85-150 frames), each a 100-frame crop -> 2 x 100 - 1 MFCC frames
    assert manifest["sample"] == {"crops": 6, "frames": 6 * 199, "crop_frames": 100, "rows_total": 6,
                                  "rows_drawn": 6, "rows_too_short": 0}  # fmt: skip
    assert manifest["settings"] == TargetSettings(**SMALL).to_dict()
    kmeans = manifest["kmeans"]
    assert (kmeans["init"], kmeans["n_init"], kmeans["batch_size"], kmeans["max_iter"]) == (
        "k-means++",
        20,
        10_000,
        100,
    )
    assert kmeans["iterations"] >= 1 and kmeans["steps"] >= kmeans["iterations"]
    assert fitted[0].name.startswith("mfcc-k8-")


def test_inertia_is_the_mean_squared_distance_to_the_nearest_centroid(speech_shards, fitted):
    settings = TargetSettings(**SMALL)
    features = crop_features(read_sample_crops(speech_shards, settings).crops, "mfcc")
    centroids = read_codebook(fitted[0]).centroids
    squared = ((features[:, None, :].astype(np.float64) - centroids[None]) ** 2).sum(axis=-1)
    assert squared.min(axis=1).mean() == pytest.approx(read_codebook(fitted[0]).manifest["kmeans"]["inertia"], rel=1e-4)
    # every centroid holds frames: k-means placed them on the data
    assert len(np.unique(squared.argmin(axis=1))) == 8


def test_progress_lines_say_what_happens(fitted):
    text = "\n".join(fitted[1])
    assert "drawing 6 of 6 segment rows (100.0%) from 2 part files" in text
    assert "6 crops -> 1194 mfcc frames of 39 values; fitting 8 clusters" in text
    assert f"wrote {fitted[0]}" in text


def test_a_second_call_reuses_the_cached_codebook(speech_shards, tmp_path):
    first = ensure_codebook(speech_shards, cache_dir=tmp_path, log=lambda line: None, **SMALL)
    written = (first / "codebook.json").stat().st_mtime_ns
    lines: list[str] = []
    again = ensure_codebook(speech_shards, cache_dir=tmp_path, log=lines.append, **SMALL)
    assert again == first and (first / "codebook.json").stat().st_mtime_ns == written
    assert lines == [f"targets: reusing {first} (same shards and settings)"]
    other = ensure_codebook(speech_shards, cache_dir=tmp_path, log=lambda line: None, **{**SMALL, "seed": 1})
    assert other != first and other.parent == tmp_path


def test_default_cache_is_under_the_shard_directory(speech_shards):
    directory = ensure_codebook(speech_shards, log=lambda line: None, **SMALL)
    assert directory.parent == speech_shards / "targets"


def test_an_unfinished_fit_is_redone(speech_shards, tmp_path):
    directory = ensure_codebook(speech_shards, cache_dir=tmp_path, log=lambda line: None, **SMALL)
    (directory / "codebook.json").unlink()  # as if the fit died after the centroids
    with pytest.raises(CodebookError, match="unfinished fit"):
        read_codebook(directory)
    assert ensure_codebook(speech_shards, cache_dir=tmp_path, log=lambda line: None, **SMALL) == directory
    assert read_codebook(directory).clusters == 8


def test_log_mel_shards_are_refused_with_the_prep_command(tmp_path):
    log_mel_shards, _ = write_audio_shards(tmp_path)
    (log_mel_shards / "manifest.json").write_text(
        json.dumps({**json.loads((log_mel_shards / "manifest.json").read_text()), "fingerprint": "x"})
    )
    with pytest.raises(NotWaveformShardsError, match="'audiomae' features .*--preset waveform"):
        ensure_codebook(log_mel_shards, log=lambda line: None, **SMALL)


def test_too_few_frames_for_k_names_the_flags(speech_shards, tmp_path):
    with pytest.raises(TooFewFramesError, match="1194 feature frames cannot fit 5000 clusters: pass fewer --clusters"):
        ensure_codebook(speech_shards, cache_dir=tmp_path, log=lambda line: None, **{**SMALL, "clusters": 5000})
    assert not any(tmp_path.iterdir()), "a failed fit leaves nothing that looks like a codebook"


def test_segments_too_short_for_the_crop_name_the_flag(speech_shards, tmp_path):
    # the rows are 3 s segments and their tails (85-150 frames): a 400-frame crop needs 200
    with pytest.raises(TooFewFramesError, match="all 6 drawn segment rows .* shorter than half a crop .*--crop-frames"):
        ensure_codebook(speech_shards, cache_dir=tmp_path, log=lambda line: None, **{**SMALL, "crop_frames": 400})


@pytest.mark.parametrize(
    "field,value,flag",
    [("sample_fraction", 0.0, "--sample-fraction"), ("clusters", 1, "--clusters"), ("features", "fbank", "--features")],
)
def test_bad_settings_name_the_flag(field, value, flag):
    with pytest.raises(ValueError, match=flag):
        TargetSettings(**{**SMALL, field: value})


def test_cli_prints_the_codebook_dir_and_fails_in_one_line(speech_shards, tmp_path, capsys):
    args = [
        "--shards",
        str(speech_shards),
        "--clusters",
        "8",
        "--crop-frames",
        "100",
        "--sample-fraction",
        "1",
        "--output",
        str(tmp_path),
    ]
    assert main(args) == 0
    printed = capsys.readouterr().out.strip()
    assert (tmp_path / printed.rsplit("/", 1)[-1] / CENTROIDS_NAME).is_file()
    assert COMMAND.run(main, ["--shards", str(tmp_path / "missing")]) == 2
    error = capsys.readouterr().err
    assert (
        error.startswith("python -m pipeline.targets: error:")
        and "python -m pipeline.prep" in error
        and error.count("\n") == 1
    )


def test_prep_rerun_into_the_shard_folder_keeps_reusing_it_beside_the_codebooks(speech_shards):
    ensure_codebook(speech_shards, log=lambda line: None, **SMALL)  # <shards>/targets/<key>/
    manifest = json.loads((speech_shards / "manifest.json").read_text())
    # prep's first decision on a re-run: a finished folder with this fingerprint is reused, not refused
    assert prepare_output_dir(speech_shards, fingerprint=manifest["fingerprint"], settings={}, overwrite=False)
