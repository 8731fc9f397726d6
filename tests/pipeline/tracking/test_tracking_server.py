"""Tracking across nodes: pipeline.tracking.runs and a real pretraining run against a real `mlflow server`.

On a cluster the workers cannot write into a SQLite file on the head, so they log to the head's
tracking server over HTTP, and artifacts travel through the server's proxy (`--serve-artifacts`):
nothing here shares a filesystem with the server's artifact folder except through HTTP.
One server and one pretraining run serve the module (a TorchTrainer costs 15-20 s on 2 cores); the
helper tests (~20 s, the server's start) run in CI, the pretraining ones are marked slow.
"""

from __future__ import annotations

import hashlib
import json
import urllib.request
from pathlib import Path

import pytest
import safetensors.torch

from pipeline.checkpoint import META_FILE, WEIGHTS_FILE
from pipeline.pretrain.driver import PretrainConfig, run_pretraining
from pipeline.shards.format import read_manifest
from pipeline.tracking import runs as tracking
from pipeline.tracking.dataset import logged_datasets
from tests.support.mlflow_server import free_port, running_mlflow_server
from tests.support.pretrain_testdata import make_tiny_shards

pytestmark = pytest.mark.ray


@pytest.fixture(scope="module")
def server(tmp_path_factory) -> tuple[str, Path]:
    root = tmp_path_factory.mktemp("mlflow_server")
    with running_mlflow_server(root) as uri:
        yield uri, root


@pytest.fixture(scope="module")
def pretrained(server, ray_local, tmp_path_factory):
    uri, _ = server
    shards_dir = make_tiny_shards(tmp_path_factory.getbasetemp())
    workdir = tmp_path_factory.mktemp("pretrain_to_server")
    config = PretrainConfig.from_flat(
        model_name="audiomae++-debug", model_overrides={"crop_frames": 100}, shards_dir=str(shards_dir), steps=6,
        global_batch_size=4, num_workers=2, cpus_per_worker=0.5, base_lr=0.1, log_every_steps=2,
        checkpoint_every_steps=6, rankme_every_steps=0, run_name="to-server", experiment_name="server",
        storage_path=str(workdir / "ray_results"), tracking_uri=uri, system_metrics_every_s=0.25,
    )  # fmt: skip
    return run_pretraining(config), shards_dir


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_tracking_helpers_work_against_the_server(server, tmp_path):
    uri, root = server
    tracking.check_store(uri)
    run = tracking.start_or_resume_run(tracking_uri=uri, experiment_name="helpers", run_name="h1")
    assert run.artifact_uri().startswith("mlflow-artifacts:/")  # the server's proxy, not a path on this machine
    (tmp_path / "notes.txt").write_text("logged over HTTP\n")
    run.log_artifact(tmp_path / "notes.txt", artifact_path="docs")
    run.log_metrics({"loss": 1.25}, step=3)
    run.finish()
    assert tracking.list_artifacts(uri, run.run_id, "docs") == ["docs/notes.txt"]
    assert [path.read_text() for path in root.joinpath("artifacts").rglob("notes.txt")] == ["logged over HTTP\n"]
    again = tracking.start_or_resume_run(tracking_uri=uri, experiment_name="helpers", run_name="h1")
    assert again.run_id == run.run_id and tracking.read_run(uri, run.run_id)["metrics"]["loss"] == [(3, 1.25)]
    page = f"{uri}/{tracking.artifact_download_path(run, 'docs/notes.txt')}"  # the route a study report links to
    with urllib.request.urlopen(page, timeout=10) as response:
        assert response.read() == b"logged over HTTP\n"


def test_a_dead_server_is_a_clear_error():
    dead = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(ValueError, match=f"--tracking-uri {dead}: the MLflow store cannot be opened"):
        tracking.check_store(dead)


@pytest.mark.slow  # the pretraining to the server: ~75 s on 2 cores, shard prep included
def test_encoder_artifact_downloads_intact_from_the_server(pretrained, server, tmp_path):
    result, _ = pretrained
    uri, _ = server
    assert tracking.read_run(uri, result.run_id)["status"] == "FINISHED"
    downloaded = tracking.download_artifacts(uri, result.run_id, "encoder", tmp_path / "fresh")
    assert sorted(path.name for path in downloaded.iterdir()) == ["encoder.safetensors", META_FILE]
    checkpoint = Path(result.checkpoint_dir)
    assert json.loads((downloaded / META_FILE).read_text()) == json.loads((checkpoint / META_FILE).read_text())
    encoder = safetensors.torch.load_file(downloaded / "encoder.safetensors")
    weights = safetensors.torch.load_file(checkpoint / WEIGHTS_FILE)
    expected = {key: value for key, value in weights.items() if key.startswith("encoder.")}
    assert sorted(encoder) == sorted(expected) and len(encoder) > 10
    assert all(encoder[key].equal(expected[key]) for key in expected)


@pytest.mark.slow  # the pretraining to the server: ~75 s on 2 cores, shard prep included
def test_each_node_logs_system_metrics_once(pretrained, server):
    result, _ = pretrained
    uri, _ = server
    metrics = tracking.read_run(uri, result.run_id)["metrics"]
    system = sorted(key for key in metrics if key.startswith("system/"))
    # One node, two workers: only its first worker samples it, under its node rank: every 0.25 s and
    # once when training ends, so there is a sample however fast the machine runs the 6 steps.
    assert {key.split("/")[1] for key in system} == {"node-0"}, system
    cpu = metrics["system/node-0/cpu_utilization_percentage"]
    memory = metrics["system/node-0/system_memory_usage_megabytes"]
    assert len(cpu) >= 1 and [step for step, _ in cpu] == list(range(len(cpu)))
    assert all(value > 0 for _, value in memory)


@pytest.mark.slow  # the pretraining to the server: ~75 s on 2 cores, shard prep included
def test_run_lists_the_shards_as_its_dataset(pretrained, server):
    result, shards_dir = pretrained
    uri, _ = server
    fingerprint = read_manifest(shards_dir)["fingerprint"]
    (dataset,) = logged_datasets(uri, result.run_id)
    assert dataset["digest"] == fingerprint[:32] and dataset["tags"]["audioscale.shard_fingerprint"] == fingerprint
    assert dataset["source"] == {"uri": str(Path(shards_dir).resolve())} and dataset["name"] == shards_dir.name
