"""The k-means target stage on shards in a bucket (a real signed S3 store on loopback): the codebook
goes beside the shards in the bucket, is reused from there, an unfinished upload is redone, and every
machine reads a local copy that follows the bucket's."""

from __future__ import annotations

import json

import numpy as np
import pytest

from models.wave.hubert_codebook import CENTROIDS_NAME, CodebookError, read_codebook
from pipeline.storage.checkpoint_copy import copy_up
from pipeline.targets import ensure_codebook
from pipeline.targets.__main__ import COMMAND, main
from pipeline.targets.stored_codebook import local_codebook
from tests.support.speech_waveform_shards import write_speech_waveform_shards

SMALL = {"clusters": 8, "crop_frames": 100, "sample_fraction": 1.0}
SMALL_FLAGS = ["--clusters", "8", "--crop-frames", "100", "--sample-fraction", "1"]


@pytest.fixture(scope="module")
def speech_shards(tmp_path_factory):
    return write_speech_waveform_shards(tmp_path_factory.mktemp("speech-waveform"))


@pytest.fixture
def bucket_shards(bucket_env, speech_shards, request):
    uri = bucket_env.uri(f"shards/{request.node.name}")
    copy_up(speech_shards, uri, what="test shards")
    return uri


def test_the_cli_fits_into_the_shards_bucket_and_reuses_it(bucket_env, bucket_shards, tmp_path, capsys):
    assert main(["--shards", bucket_shards, *SMALL_FLAGS]) == 0
    printed = capsys.readouterr().out.strip()
    prefix = bucket_shards.partition("?")[0] + "/targets/"
    assert printed.startswith(prefix) and printed.endswith(bucket_shards.partition("?")[2])
    key = printed.partition("?")[0].rpartition("/")[2]
    stored = bucket_env.keys(f"{prefix.split('/', 3)[3]}{key}/")
    assert sorted(name.rpartition("/")[2] for name in stored) == [CENTROIDS_NAME, "codebook.json"]
    # The same fit as on a local copy of the shards: the seed fixes the draw and k-means.
    local = ensure_codebook(write_speech_waveform_shards(tmp_path / "copy"), log=lambda line: None, **SMALL)
    np.testing.assert_array_equal(read_codebook(local_codebook(printed)).centroids, read_codebook(local).centroids)
    assert main(["--shards", bucket_shards, *SMALL_FLAGS]) == 0
    assert "already holds this codebook" in capsys.readouterr().err


def test_an_unfinished_upload_is_fitted_again(bucket_env, bucket_shards):
    directory = ensure_codebook(bucket_shards, log=lambda line: None, **SMALL)
    client = bucket_env.client()
    bucket, _, prefix = directory.partition("?")[0].removeprefix("s3://").partition("/")
    client.delete_object(Bucket=bucket, Key=f"{prefix}/codebook.json")  # centroids, no manifest: cut mid-upload
    with pytest.raises(CodebookError, match="no finished codebook"):
        local_codebook(directory)
    lines: list[str] = []
    assert ensure_codebook(bucket_shards, log=lines.append, **SMALL) == directory
    assert any("uploaded the codebook" in line for line in lines)
    assert read_codebook(local_codebook(directory)).clusters == 8


def test_a_machine_copy_follows_the_buckets_codebook(bucket_env, bucket_shards):
    directory = ensure_codebook(bucket_shards, log=lambda line: None, **SMALL)
    first = local_codebook(directory)
    assert local_codebook(directory) == first  # reused, not downloaded again
    refit = json.loads((first / "codebook.json").read_text()) | {"created_utc": "refitted"}
    client = bucket_env.client()
    bucket, _, prefix = directory.partition("?")[0].removeprefix("s3://").partition("/")
    client.put_object(Bucket=bucket, Key=f"{prefix}/codebook.json", Body=json.dumps(refit).encode())
    assert json.loads((local_codebook(directory) / "codebook.json").read_text())["created_utc"] == "refitted"


def test_a_read_only_bucket_is_one_line_before_the_fit(bucket_env, bucket_shards, monkeypatch, capsys):
    reader = bucket_env.read_only_user("targets-reader")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", reader.access_key_id)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", reader.secret_access_key)
    assert COMMAND.run(main, ["--shards", bucket_shards, *SMALL_FLAGS]) == 2
    error = capsys.readouterr().err
    assert error.startswith("python -m pipeline.targets: error: --shards s3://") and "not write in it" in error
    assert error.count("\n") == 1


def test_a_hubert_run_on_bucket_shards_trains_with_the_buckets_codebook(bucket_env, bucket_shards):
    """The driver's choice (`with_codebook`) and every worker's build (`model_build_overrides`): the
    codebook is fitted into the bucket once, named there by URI, and each build reads a local copy."""
    from pipeline.pretrain.config import PretrainConfig
    from pipeline.pretrain.discrete_targets import with_codebook

    config = PretrainConfig.from_flat(
        model_name="hubert-debug", model_overrides={"crop_frames": 100}, shards_dir=bucket_shards
    )
    chosen, model = with_codebook(config, config.describe_model(), bucket_shards)
    uri = chosen.model.model_overrides["codebook"]
    assert uri.startswith(bucket_shards.partition("?")[0] + "/targets/mfcc-k100-")  # iteration 1: MFCC, k 100
    assert not model.needs_codebook
    local = chosen.model_build_overrides()["codebook"]
    assert read_codebook(local).centroids.shape == (100, 39)
    assert local == str(local_codebook(uri))  # one copy per machine, reused by every build
