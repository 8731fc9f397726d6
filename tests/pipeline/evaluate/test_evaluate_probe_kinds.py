"""`python -m pipeline.evaluate --probe linear|knn` on a debug checkpoint and tiny tasks."""

from __future__ import annotations

import json

import pytest
import torch

import models
from pipeline.checkpoint import save_model_checkpoint
from pipeline.evaluate.__main__ import build_parser, main
from pipeline.evaluate.probes.lid import LidProbeConfig
from pipeline.evaluate.probes.linear import LinearProbeConfig
from pipeline.evaluate.run import evaluate_checkpoint
from tests.support.hear_task_fixtures import build_tiny_tasks


@pytest.fixture(scope="module")
def tasks_dir(tmp_path_factory):
    return build_tiny_tasks(tmp_path_factory.mktemp("tasks"))


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    torch.manual_seed(0)
    model = models.build_model("audiomae++-debug")
    return save_model_checkpoint(
        tmp_path_factory.mktemp("ckpt"),
        model,
        model_name="audiomae++-debug",
        overrides={},
        step=3,
        shard_fingerprint="t",
    )


@pytest.mark.parametrize("probe", ["linear", "knn"])
def test_cli_scores_every_task_with_the_probe_and_names_it(probe, tmp_path, tasks_dir, checkpoint, capsys):
    output = tmp_path / "out"
    assert (
        main(
            [
                "--checkpoint",
                str(checkpoint),
                "--tasks-dir",
                str(tasks_dir),
                "--probe",
                probe,
                "--seeds",
                "2",
                "--rankme-n",
                "40",
                "--workers",
                "1",
                "--no-mlflow",
                "--output",
                str(output),
            ]
        )
        == 0
    )
    saved = json.loads((output / "evaluation.json").read_text())
    assert set(saved["task_scores"]) == {"tones", "mixtures"}  # multiclass and multilabel
    assert {score["probe"] for score in saved["task_scores"].values()} == {probe}
    assert saved["probe_protocol"]["schedule"] == probe and saved["q_probe"] == probe
    assert saved["task_scores"]["tones"]["mean"] > 0.6  # a random-weight encoder separates three tones
    assert saved["task_scores"]["mixtures"]["metric"] == "mAP"
    for score in saved["task_scores"].values():
        assert score["seed_scores"][0] == score["seed_scores"][1]  # deterministic probes
    assert all(line.endswith(f",{probe}") for line in (output / "evaluation.csv").read_text().splitlines()[1:-1])
    assert f"probe {probe}" in capsys.readouterr().out


def test_cli_accepts_every_probe_and_refuses_mlp_options_with_linear_or_knn(checkpoint):
    for probe in ("hear", "quick", "linear", "knn"):
        assert build_parser().parse_args(["--checkpoint", "c", "--probe", probe]).probe == probe
    for extra in (["--lid-head", "agent"], ["--max-epochs", "3"], ["--grid-points", "2"]):
        with pytest.raises(SystemExit, match="go with the MLP probes"):
            main(["--checkpoint", str(checkpoint), "--probe", "linear", "--no-mlflow", *extra])


def test_a_lid_head_needs_an_mlp_schedule(tasks_dir, checkpoint):
    with pytest.raises(ValueError, match="goes with an MLP schedule"):
        evaluate_checkpoint(
            checkpoint,
            tasks_dir=tasks_dir,
            probe_training=LinearProbeConfig(),
            lid_probe=LidProbeConfig(attention="self"),
        )
