"""`python -m pipeline.evaluate --lid-head ...`: language-ID tasks scored by the LID head, the rest by the MLP."""

from __future__ import annotations

import json

import pytest
import torch

import models
from pipeline.checkpoint import save_model_checkpoint
from pipeline.evaluate.__main__ import main
from pipeline.evaluate.probes.grid import QUICK_PROBE_TRAINING
from pipeline.evaluate.probes.lid import LidProbeConfig
from pipeline.evaluate.run import evaluate_checkpoint
from pipeline.task_format.reader import read_task_info
from pipeline.tracking.runs import read_run
from tests.support.hear_task_fixtures import build_tiny_language_task, build_tiny_tasks


@pytest.fixture(scope="module")
def tasks_dir(tmp_path_factory):
    root = build_tiny_tasks(tmp_path_factory.mktemp("tasks"), clips_per_class={"train": 6, "valid": 3, "test": 3})
    return build_tiny_language_task(root)


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    torch.manual_seed(0)
    model = models.build_model("audiomae++-debug")
    return save_model_checkpoint(
        tmp_path_factory.mktemp("ckpt"),
        model,
        model_name="audiomae++-debug",
        overrides={},
        step=7,
        shard_fingerprint="t",
    )


def test_language_task_is_marked_in_its_metadata(tasks_dir):
    assert read_task_info(tasks_dir / "toy_language").is_language_id
    assert not read_task_info(tasks_dir / "tones").is_language_id


def test_cli_with_agent_head_scores_the_language_task_with_it(tasks_dir, checkpoint, tracking_uri, tmp_path, capsys):
    output = tmp_path / "out"
    assert (
        main(
            [
                "--checkpoint",
                str(checkpoint),
                "--tasks-dir",
                str(tasks_dir),
                "--tasks",
                "tones,toy_language",
                "--lid-head",
                "agent",
                "--probe",
                "quick",
                "--seeds",
                "2",
                "--task-rankme-n",
                "40",
                "--tracking-uri",
                tracking_uri,
                "--output",
                str(output),
            ]
        )
        == 0
    )
    printed = capsys.readouterr().out
    assert "toy_language: top1_acc" in printed and "by lid-agent" in printed
    saved = json.loads((output / "evaluation.json").read_text())
    language, tones = saved["task_scores"]["toy_language"], saved["task_scores"]["tones"]
    assert (language["probe"], tones["probe"]) == ("lid-agent", "mlp-quick")
    assert len(language["seed_scores"]) == 2 and 0.0 <= language["mean"] <= 1.0
    # Three toy languages (chance 1/3) whose syllable pitch and rate differ: the head must beat chance.
    assert language["mean"] > 0.5
    assert saved["lid_probe"]["attention"] == "agent" and saved["lid_probe"]["learning_rate"] == 1e-4
    assert saved["q"] == pytest.approx((language["mean"] + tones["mean"]) / 2)
    run = read_run(tracking_uri, saved["run_id"])
    assert (run["params"]["lid_head"], run["params"]["toy_language/probe"], run["params"]["tones/probe"]) == (
        "agent",
        "lid-agent",
        "mlp-quick",
    )
    assert run["params"]["lid_heads"] == "4" and run["params"]["lid_attention_dim"] == "64"
    assert run["metrics"]["toy_language/score"] == [(7, pytest.approx(language["mean"]))]
    csv_lines = (output / "evaluation.csv").read_text().splitlines()
    assert any(line.startswith("toy_language,top1_acc,") and line.endswith(",lid-agent") for line in csv_lines)


def test_lid_head_without_a_language_task_warns_and_keeps_the_mlp(tasks_dir, checkpoint):
    with pytest.warns(UserWarning, match="none of the tasks"):
        result = evaluate_checkpoint(
            checkpoint,
            tasks_dir=tasks_dir,
            task_names=["tones"],
            task_rankme_n=20,
            seeds=1,
            probe_training=QUICK_PROBE_TRAINING,
            lid_probe=LidProbeConfig(attention="self"),
        )
    assert result.task_scores["tones"]["probe"] == "mlp-quick"
