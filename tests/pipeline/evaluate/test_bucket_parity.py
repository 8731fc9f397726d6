"""One Q wherever a checkpoint is measured: the same model trained from the same shards on disk and in a
bucket, evaluated where each lives, scores the same to the last digit and records the same readout and
input normalisation. Before, a `dasheng`-preset checkpoint trained from bucket shards found no manifest
(`Path("s3://...") / "manifest.json"`) and was standardised per clip instead of with the shards' per-bin
statistics: Q 0.668 from the bucket against 0.684 from disk for the same weights.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import pytest

from pipeline.audio.frontend import get_preset
from pipeline.evaluate.__main__ import main as evaluate_main
from pipeline.evaluate.embeddings import normalisation_for
from pipeline.pretrain.driver import PretrainConfig, run_pretraining
from pipeline.shards.format import read_manifest
from pipeline.storage.checkpoint_copy import copy_up, local_checkpoint
from tests.support.hear_task_fixtures import build_tiny_tasks
from tests.support.pretrain_testdata import make_tiny_shards


def test_the_manifest_of_bucket_shards_gives_the_dataset_statistics(bucket_env, tmp_path_factory):
    shards = make_tiny_shards(tmp_path_factory.getbasetemp(), preset_name="dasheng")
    uri = bucket_env.uri("parity/stats-shards")
    copy_up(shards, uri, what="--shards")
    preset = get_preset("dasheng")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no per-clip substitute, no warning
        from_bucket = normalisation_for(preset, {"pretrain_config": {"shards_dir": uri}})
        from_disk = normalisation_for(preset, {"pretrain_config": {"shards_dir": str(shards)}})
    assert not from_bucket.per_clip and from_bucket.stats_from == uri.partition("?")[0]
    np.testing.assert_array_equal(from_bucket.bin_mean, np.asarray(read_manifest(shards)["mean"], np.float32))
    assert from_bucket.record()["input_stats_sha256"] == from_disk.record()["input_stats_sha256"]
    assert from_disk.record()["input_normalisation"] == "dataset"


def test_shards_that_are_gone_are_a_recorded_substitute_and_an_unreachable_bucket_an_error(tmp_path):
    preset = get_preset("dasheng")
    with pytest.warns(UserWarning, match="standardising each clip instead"):
        gone = normalisation_for(preset, {"pretrain_config": {"shards_dir": str(tmp_path / "deleted")}})
    assert gone.record()["input_normalisation"].startswith("per-clip (substitute")
    unreachable = "s3://nowhere/shards?endpoint_override=127.0.0.1:1&scheme=http"
    with pytest.raises(Exception, match="cannot read their manifest"):
        normalisation_for(preset, {"pretrain_config": {"shards_dir": unreachable}})


def _train(shards: str, storage: str, workdir: Path, name: str) -> str:
    config = PretrainConfig.from_flat(
        model_name="mae-debug", model_overrides={"crop_frames": 96}, shards_dir=shards, steps=3,
        global_batch_size=4, micro_batch_size=4, num_workers=1, cpus_per_worker=1, base_lr=0.5, warmup_steps=1,
        log_every_steps=1, checkpoint_every_steps=3, rankme_every_steps=0, run_name=name, storage_path=storage,
        tracking_uri=f"sqlite:///{workdir / 'mlflow.db'}", max_failures=0, system_metrics_every_s=0,
    )  # fmt: skip
    return run_pretraining(config).checkpoint_dir


def _evaluate(checkpoint: str, tasks: Path, output: Path) -> dict:
    assert evaluate_main(["--checkpoint", checkpoint, "--tasks-dir", str(tasks), "--probe", "knn", "--seeds", "1",
                          "--workers", "1", "--rankme-n", "32", "--no-mlflow", "--output", str(output)]) == 0  # fmt: skip
    return json.loads((output / "evaluation.json").read_text())


@pytest.mark.slow
@pytest.mark.ray
def test_a_checkpoint_trained_in_a_bucket_scores_as_the_same_one_trained_on_disk(
    ray_with_bucket_env, bucket_env, tmp_path_factory, tmp_path
):
    shards = make_tiny_shards(tmp_path_factory.getbasetemp(), preset_name="dasheng")
    shards_uri = bucket_env.uri("parity/shards")
    copy_up(shards, shards_uri, what="--shards")
    on_disk = _train(str(shards), str(tmp_path / "ray_results"), tmp_path, "disk")
    in_bucket = _train(shards_uri, bucket_env.uri("parity/ray_results"), tmp_path, "bucket")
    assert in_bucket.startswith("s3://")
    with local_checkpoint(in_bucket) as copy:
        bucket_meta = json.loads((copy / "model.json").read_text())
    disk_meta = json.loads((Path(on_disk) / "model.json").read_text())
    assert bucket_meta["sha256"]["model.safetensors"] == disk_meta["sha256"]["model.safetensors"]  # same weights
    assert bucket_meta["mel_mean"] == disk_meta["mel_mean"] == read_manifest(shards)["mean"]
    tasks = build_tiny_tasks(tmp_path / "tasks")
    from_disk = _evaluate(on_disk, tasks, tmp_path / "eval-disk")
    from_bucket = _evaluate(in_bucket, tasks, tmp_path / "eval-bucket")
    assert from_bucket["checkpoint_dir"].startswith("s3://")
    assert from_bucket["q"] == from_disk["q"]  # to the last digit
    assert from_bucket["rankme"] == from_disk["rankme"]
    assert from_bucket["task_scores"] == from_disk["task_scores"]
    for key in ("input_normalisation", "input_stats_sha256", "readout_stats", "readout_calibration_pool",
                "readout_calibration_crops"):  # fmt: skip
        assert from_bucket[key] == from_disk[key], key
    assert from_bucket["input_normalisation"] == "dataset" and from_bucket["readout_stats"] == "calibrated"
    assert from_bucket["readout_calibration_crops"] > 0
