"""pipeline.tracking.dataset: the shards as a dataset input of a real MLflow run."""

from __future__ import annotations

import hashlib

from pipeline.tracking import runs as tracking
from pipeline.tracking.dataset import DIGEST_CHARS, log_shards_input, logged_datasets

FINGERPRINT = hashlib.sha256(b"some prep settings and inputs").hexdigest()  # prep's fingerprint: 64 hex


def test_shards_are_logged_with_the_fingerprint_as_digest_once(tracking_uri, tmp_path):
    shards = tmp_path / "shards-audiomae"
    shards.mkdir()
    run = tracking.start_or_resume_run(tracking_uri=tracking_uri, experiment_name="data", run_name="local")
    log_shards_input(run, shards_dir=shards, fingerprint=FINGERPRINT)
    log_shards_input(run, shards_dir=shards, fingerprint=FINGERPRINT)  # a resume logs it again
    (dataset,) = logged_datasets(tracking_uri, run.run_id)
    assert dataset["name"] == "shards-audiomae"
    assert dataset["digest"] == FINGERPRINT[:DIGEST_CHARS] and DIGEST_CHARS <= 36  # MLflow's digest column
    assert dataset["source"] == {"uri": str(shards)}
    assert dataset["tags"] == {"mlflow.data.context": "train", "audioscale.shard_fingerprint": FINGERPRINT}


def test_cloud_shards_keep_their_uri_as_source(tracking_uri):
    run = tracking.start_or_resume_run(tracking_uri=tracking_uri, experiment_name="data", run_name="cloud")
    log_shards_input(run, shards_dir="s3://bucket/corpus/shards/", fingerprint=FINGERPRINT)
    (dataset,) = logged_datasets(tracking_uri, run.run_id)
    assert (dataset["name"], dataset["source"]) == ("shards", {"uri": "s3://bucket/corpus/shards/"})
    assert dataset["source_type"] == "s3"
