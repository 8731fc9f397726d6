"""evaluate_checkpoint and `python -m pipeline.evaluate` on a debug checkpoint and tiny tasks."""

from __future__ import annotations

import dataclasses
import json
import math

import pytest
import torch

import models
from pipeline.checkpoint import save_model_checkpoint
from pipeline.evaluate.__main__ import main
from pipeline.evaluate.probes.grid import PROBE_SCHEDULES, ProbeTrainingConfig
from pipeline.evaluate.run import evaluate_checkpoint
from pipeline.task_format.reader import TaskFormatError
from pipeline.tracking.runs import list_artifacts, read_run, start_or_resume_run
from tests.support.hear_task_fixtures import build_tiny_tasks

QUICK_ARGS = ["--seeds", "2", "--grid-points", "2", "--max-epochs", "9", "--patience", "2", "--task-rankme-n", "40"]


@pytest.fixture(scope="module")
def tasks_dir(tmp_path_factory):
    return build_tiny_tasks(tmp_path_factory.mktemp("tasks"))


def _checkpoint(directory, step=5, extra=None):
    torch.manual_seed(0)
    model = models.build_model("audiomae++-debug")
    return save_model_checkpoint(
        directory, model, model_name="audiomae++-debug", overrides={}, step=step, shard_fingerprint="t", extra=extra
    )


def test_evaluate_checkpoint_scores_every_task(tmp_path, tasks_dir):
    result = evaluate_checkpoint(
        _checkpoint(tmp_path / "ckpt"),
        tasks_dir=tasks_dir,
        task_rankme_n=50,
        seeds=2,
        probe_training=ProbeTrainingConfig(max_epochs=9, patience_checks=2, grid_points=2),
    )
    assert set(result.task_scores) == {"tones", "mixtures"}
    assert result.task_scores["tones"]["metric"] == "top1_acc"
    assert result.task_scores["mixtures"]["metric"] == "mAP"
    # Even a random-weight encoder separates three pure tones (chance is 1/3).
    assert result.task_scores["tones"]["mean"] > 0.6
    assert result.q == pytest.approx((result.task_scores["tones"]["mean"] + result.task_scores["mixtures"]["mean"]) / 2)
    assert 0.0 <= result.q <= 1.0
    # No training shards recorded: no pool, so R is NaN; the task-audio diagnostic keeps its N.
    assert math.isnan(result.rankme) and result.rankme_capped
    assert result.task_rankme_n == 50 and 1.0 <= result.task_rankme <= 50
    for score in result.task_scores.values():
        assert len(score["seed_scores"]) == 2
        if len(set(score["seed_scores"])) == 1:  # seeds that agree are no replicates: no interval
            assert math.isnan(score["ci_low"]) and math.isnan(score["ci_high"])
        else:
            assert score["ci_low"] < score["mean"] < score["ci_high"]


def test_unknown_task_name_is_a_clear_error(tmp_path, tasks_dir):
    with pytest.raises(TaskFormatError, match="unknown task"):
        evaluate_checkpoint(_checkpoint(tmp_path / "ckpt"), tasks_dir=tasks_dir, task_names=["nope"])


def test_cli_logs_to_mlflow_and_writes_tables(tmp_path, tasks_dir, tracking_uri, capsys):
    checkpoint = _checkpoint(tmp_path / "ckpt", step=12)
    output = tmp_path / "out"
    assert (
        main(
            [
                "--checkpoint",
                str(checkpoint),
                "--tasks-dir",
                str(tasks_dir),
                "--tasks",
                "tones",
                "--tracking-uri",
                tracking_uri,
                "--output",
                str(output),
                *QUICK_ARGS,
            ]
        )
        == 0
    )
    printed = capsys.readouterr().out
    assert "tones" in printed and "task-audio RankMe" in printed and "N=40, diagnostic" in printed
    saved = json.loads((output / "evaluation.json").read_text())
    run = read_run(tracking_uri, saved["run_id"])
    assert run["params"]["task_rankme_n"] == "40" and run["params"]["rankme_k"] == "240"
    assert run["tags"]["rankme_capped"] == "true"
    assert (run["params"]["probe_max_epochs"], run["params"]["probe_grid_points"]) == ("9", "2")
    assert run["metrics"]["q"] == [(12, pytest.approx(saved["q"]))]
    assert run["metrics"]["task_rankme"] == [(12, pytest.approx(saved["task_rankme"]))]
    assert run["metrics"]["tones/score"][0][1] == pytest.approx(saved["task_scores"]["tones"]["mean"])
    # Two MLP seeds: an interval over seeds, unless both scored the same (pure tones often score 1.0).
    seeds_differ = len(set(saved["task_scores"]["tones"]["seed_scores"])) > 1
    assert ("tones/ci_low" in run["metrics"]) == seeds_differ
    assert sorted(list_artifacts(tracking_uri, saved["run_id"], "evaluation")) == [
        "evaluation/evaluation.csv",
        "evaluation/evaluation.json",
    ]
    csv_lines = (output / "evaluation.csv").read_text().splitlines()
    assert csv_lines[0] == "task,metric,mean,ci_low,ci_high,interval_over,probe" and csv_lines[1].startswith(
        "tones,top1_acc,"
    )
    assert csv_lines[1].endswith(",mlp-hear")


def test_cli_with_run_id_finds_checkpoint_and_logs_under_pretraining_run(tmp_path, tasks_dir, tracking_uri):
    pretraining = start_or_resume_run(tracking_uri=tracking_uri, experiment_name="pretrain", run_name="debug-run")
    storage = tmp_path / "ray_results"
    pretraining.log_params({"storage_path": str(storage), "run_name": "debug-run"})
    _checkpoint(storage / "debug-run" / "checkpoint_step_00000003", step=3)
    _checkpoint(storage / "debug-run" / "checkpoint_step_00000008", step=8)
    assert (
        main(
            [
                "--run-id",
                pretraining.run_id,
                "--tasks-dir",
                str(tasks_dir),
                "--tasks",
                "tones",
                "--tracking-uri",
                tracking_uri,
                *QUICK_ARGS,
            ]
        )
        == 0
    )
    parent = read_run(tracking_uri, pretraining.run_id)
    assert [step for step, _ in parent["metrics"]["eval_q"]] == [8]
    assert parent["metrics"]["eval_rankme_n"] == [(8, 0.0)]  # no pool: the checkpoint names no shards
    assert parent["tags"]["eval_rankme_capped"] == "true"
    saved = json.loads(
        (storage / "debug-run" / "checkpoint_step_00000008" / "evaluation" / "evaluation.json").read_text()
    )
    child = read_run(tracking_uri, saved["run_id"])
    assert child["tags"]["mlflow.parentRunId"] == pretraining.run_id
    assert not math.isnan(child["metrics"]["q"][0][1])


def test_probe_flag_names_the_schedule_and_overrides_apply_on_top(tmp_path, tasks_dir, tracking_uri):
    output = tmp_path / "out"
    assert (
        main(
            [
                "--checkpoint",
                str(_checkpoint(tmp_path / "ckpt")),
                "--tasks-dir",
                str(tasks_dir),
                "--tasks",
                "tones",
                "--tracking-uri",
                tracking_uri,
                "--output",
                str(output),
                "--probe",
                "quick",
                "--max-epochs",
                "6",
                "--seeds",
                "2",
                "--task-rankme-n",
                "40",
            ]
        )
        == 0
    )
    saved = json.loads((output / "evaluation.json").read_text())
    quick = PROBE_SCHEDULES["quick"]
    # The quick schedule's values, except the one overridden.
    assert saved["probe_protocol"] == {**dataclasses.asdict(quick), "max_epochs": 6, "hidden_layer_choices": [1]}
    assert saved["probe_protocol"]["schedule"] == "quick" and quick.max_epochs != 6
    assert saved["task_scores"]["tones"]["probe"] == "mlp-quick"
    assert (output / "evaluation.csv").read_text().splitlines()[1].endswith(",mlp-quick")
    params = read_run(tracking_uri, saved["run_id"])["params"]
    assert (params["probe_schedule"], params["probe_max_epochs"], params["probe_grid_points"]) == ("quick", "6", "2")
    assert (params["tones/probe"], params["lid_head"]) == ("mlp-quick", "none")


def test_help_explains_the_schedules_and_bad_overrides_are_refused(tmp_path, capsys):
    with pytest.raises(SystemExit):
        main(["--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "hear: HEAR 2021's predictor schedule (1 or 2 hidden layer(s) of 1024, 8 of 16 grid points" in text
    assert "quick: the same probe family" in text and "tens of minutes per checkpoint on 2 CPU cores" in text
    assert "agent" in text and "language-ID tasks only" in text
    checkpoint = str(tmp_path / "never-read")
    with pytest.raises(SystemExit, match="grid has 8 points"):
        main(["--checkpoint", checkpoint, "--probe", "quick", "--grid-points", "9"])
    with pytest.raises(SystemExit, match="must be positive"):
        main(["--checkpoint", checkpoint, "--patience", "0"])


@pytest.mark.parametrize("flag", ["--rankme-n", "--task-rankme-n"])
def test_a_rankme_pool_of_one_crop_is_refused_before_any_model_loads(tmp_path, flag):
    """RankMe of one embedding is 1 whatever the model: evaluate refuses it as pretrain does."""
    with pytest.raises(SystemExit, match=f"{flag} must be at least 2, got 1"):
        main(["--checkpoint", str(tmp_path / "never-read"), flag, "1"])


def test_knn_cli_reports_the_test_clip_interval_not_a_zero_width_one(tmp_path, tracking_uri):
    """`--probe knn` runs 3 seeds that repeat one score: the table and MLflow give the test clips' interval."""
    output = tmp_path / "out"
    tasks_dir = build_tiny_tasks(tmp_path / "tasks", label_noise=0.25)  # wrong labels: Q < 1, clips to resample
    args = ["--checkpoint", str(_checkpoint(tmp_path / "ckpt", step=3)), "--tasks-dir", str(tasks_dir), "--tasks",
            "tones", "--probe", "knn", "--task-rankme-n", "40", "--tracking-uri", tracking_uri, "--output", str(output)]  # fmt: skip
    assert main(args) == 0
    saved = json.loads((output / "evaluation.json").read_text())
    tones = saved["task_scores"]["tones"]
    assert len(tones["seed_scores"]) == 3 and len(set(tones["seed_scores"])) == 1
    assert math.isnan(tones["ci_low"])
    row = (output / "evaluation.csv").read_text().splitlines()[1].split(",")
    low, high = float(row[3]), float(row[4])
    assert row[5] == "test clips" and low < float(row[2]) < high, row
    metrics = read_run(tracking_uri, saved["run_id"])["metrics"]
    assert "tones/ci_low" not in metrics
    assert metrics["tones/test_ci_low"][0][1] == pytest.approx(low) and metrics["tones/test_ci_high"][0][1] > low


def test_results_go_to_a_bucket_output(tmp_path, tracking_uri, bucket_env, monkeypatch):
    """`--output s3://...` puts evaluation.json and .csv in the bucket, not in a local folder named `s3:`."""
    monkeypatch.chdir(tmp_path)  # where a path join of the URI would have made that folder
    tasks_dir = build_tiny_tasks(tmp_path / "tasks")
    args = ["--checkpoint", str(_checkpoint(tmp_path / "ckpt", step=3)), "--tasks-dir", str(tasks_dir), "--tasks",
            "tones", "--probe", "knn", "--task-rankme-n", "40", "--tracking-uri", tracking_uri,
            "--output", bucket_env.uri("evaluations/ckpt")]  # fmt: skip
    assert main(args) == 0
    keys = bucket_env.keys("evaluations/ckpt/")
    assert {"evaluations/ckpt/evaluation.json", "evaluations/ckpt/evaluation.csv"} <= set(keys)
    assert not (tmp_path / "s3:").exists()
