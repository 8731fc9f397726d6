"""Pretraining on real Ray Train, real MLflow and tiny real shards (espeak-ng speech via prep).

Each TorchTrainer costs 15-20 s of set-up on 2 cores, so one 2-worker run (with a worker crash
injected half way) serves the end-to-end and fault-tolerance tests, and its continuation serves
the resume tests.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

from models import build_model
from pipeline.checkpoint import (
    load_model_from_checkpoint,
    read_checkpoint_meta,
    verify_checkpoint,
)
from pipeline.pretrain.driver import NonFiniteLossError, PretrainConfig, run_pretraining
from pipeline.pretrain.health_checks import HEALTH_CHECK_ENV, HEALTH_CHECK_INTERVAL_S
from pipeline.tracking import runs as tracking
from tests.support.pretrain_testdata import make_tiny_shards

pytestmark = pytest.mark.ray

CRASH_AFTER_STEP = 7
CHECKPOINT_EVERY = 4


@pytest.fixture(scope="module")
def shards_dir(ray_local, tmp_path_factory) -> Path:
    return make_tiny_shards(tmp_path_factory.getbasetemp())


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("pretrain")


def tiny_config(shards_dir: Path, workdir: Path, **changes) -> PretrainConfig:
    settings = dict(
        model_name="audiomae++-debug",
        model_overrides={"crop_frames": 100},
        shards_dir=str(shards_dir),
        steps=12,
        global_batch_size=8,
        micro_batch_size=2,  # 2 workers x 2 crops x 2 accumulation steps
        num_workers=2,
        cpus_per_worker=0.5,
        base_lr=0.1,  # peak lr 0.1 x 8 / 256 = 3e-3: a 0.1M-parameter model moves in 12 steps
        warmup_steps=2,
        log_every_steps=2,
        checkpoint_every_steps=CHECKPOINT_EVERY,
        rankme_every_steps=6,
        rankme_n=16,
        run_name="tiny",
        storage_path=str(workdir / "ray_results"),
        tracking_uri=f"sqlite:///{workdir / 'mlflow.db'}",
        max_failures=2,
    )
    return PretrainConfig.from_flat(**{**settings, **changes})


def _with_env(env: dict[str, str], fn):
    saved = {key: os.environ.get(key) for key in env}
    os.environ.update(env)
    try:
        return fn()
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


@pytest.fixture(scope="module")
def crashed_run(shards_dir, workdir):
    """12 steps on 2 workers; rank 1 kills its process once after step 7."""
    env = {
        "AUDIOSCALE_TEST_CRASH_AT_STEP": str(CRASH_AFTER_STEP),
        "AUDIOSCALE_TEST_CRASH_RANK": "1",
        "AUDIOSCALE_TEST_CRASH_MARKER": str(workdir / "crashed.marker"),
    }
    config = tiny_config(shards_dir, workdir)
    os.environ.pop(HEALTH_CHECK_ENV, None)  # whatever set it before, this run must set it itself
    result = _with_env(env, lambda: run_pretraining(config))
    return config, result, tracking.read_run(config.tracking.tracking_uri, result.run_id)


@pytest.fixture(scope="module")
def resumed_run(crashed_run, shards_dir, workdir):
    config, first, _ = crashed_run
    result = run_pretraining(tiny_config(shards_dir, workdir, steps=16))
    return first, result, tracking.read_run(config.tracking.tracking_uri, result.run_id)


def test_loss_falls(crashed_run):
    _, result, run = crashed_run
    losses = [value for _, value in run["metrics"]["loss"]]
    assert losses[-1] < 0.9 * losses[0], losses
    assert result.final_loss == pytest.approx(losses[-1])


def test_the_run_set_ray_trains_poll_interval_before_training(crashed_run):
    # Unset before the run; only the driver can have set it, for Ray Train to forward to its controller.
    assert os.environ.get(HEALTH_CHECK_ENV) == str(HEALTH_CHECK_INTERVAL_S)


def test_mlflow_run_has_parameters_and_metrics(crashed_run):
    config, result, run = crashed_run
    params = run["params"]
    assert params["model_name"] == "audiomae++-debug"
    assert params["shard_fingerprint"] == read_checkpoint_meta(result.checkpoint_dir)["shard_fingerprint"] != ""
    assert params["code_version"] == tracking.code_version()
    assert int(params["encoder_parameters"]) == result.encoder_parameters > 0
    assert int(params["total_parameters"]) == result.total_parameters > result.encoder_parameters
    assert params["global_batch_size"] == "8" and params["accumulation_steps"] == "2"
    for key in ("loss", "lr", "grad_norm", "samples_per_s", "step_time_s", "rankme"):
        assert run["metrics"][key], key
    assert max(step for step, _ in run["metrics"]["loss"]) == 12
    assert run["status"] == "FINISHED"


def test_rankme_is_recorded_over_training(crashed_run):
    _, result, run = crashed_run
    steps = [step for step, _ in result.rankme_history]
    assert steps == [0, 6, 12]
    assert all(1.0 <= value <= 16.0 for _, value in result.rankme_history)  # at most N = 16 clips
    assert all(value == round(value, 2) for _, value in result.rankme_history)  # logged to 2 decimals


def test_checkpoint_holds_final_weights_and_encoder_artifact(crashed_run):
    config, result, run = crashed_run
    assert Path(result.checkpoint_dir).name == "checkpoint_step_00000012"
    model, meta = load_model_from_checkpoint(result.checkpoint_dir)
    assert meta["step"] == result.steps == 12
    assert meta["model_name"] == "audiomae++-debug" and meta["crop_frames"] == 100
    assert torch.isfinite(model(torch.randn(2, 100, 80)).loss)
    assert sorted(tracking.list_artifacts(config.tracking.tracking_uri, result.run_id, "encoder")) == [
        "encoder/encoder.safetensors",
        "encoder/model.json",
    ]


def test_worker_crash_resumes_from_last_checkpoint_not_step_zero(crashed_run, workdir):
    _, result, run = crashed_run
    assert (workdir / "crashed.marker").is_file(), "the injected crash did not happen"
    restarts = [value for step, value in run["metrics"]["resumed_from_step"]]
    assert restarts[0] == 0
    # After the crash the worker group restarted from a checkpoint taken before it, not from 0.
    assert len(restarts) == 2 and 0 < restarts[1] <= CRASH_AFTER_STEP and restarts[1] % CHECKPOINT_EVERY == 0
    assert result.steps == 12


def test_same_run_name_with_more_steps_continues(resumed_run):
    first, second, run = resumed_run
    assert second.run_id == first.run_id
    assert second.steps == 16
    assert run["metrics"]["resumed_from_step"][-1] == (12, 12.0)
    assert Path(second.checkpoint_dir).name == "checkpoint_step_00000016"
    assert run["tags"]["resumed_param.steps"] == "16"


def test_resumed_run_logs_only_new_steps(resumed_run):
    _, _, run = resumed_run
    loss_steps = [step for step, _ in run["metrics"]["loss"]]
    assert [s for s in loss_steps if s > 12] == [14, 16]


def test_non_finite_loss_stops_with_clear_error_and_keeps_checkpoint(shards_dir, workdir):
    config = tiny_config(
        shards_dir,
        workdir,
        run_name="diverges",
        num_workers=1,
        micro_batch_size=4,
        rankme_every_steps=0,
        max_failures=0,
    )
    with pytest.raises(NonFiniteLossError, match=r"'diverges'.*non-finite at step 6") as error:
        _with_env({"AUDIOSCALE_TEST_NAN_AT_STEP": "6"}, lambda: run_pretraining(config))
    last_good = Path(config.checkpoint.storage_path) / "diverges" / "checkpoint_step_00000004"
    assert str(last_good) in str(error.value)
    model, meta = load_model_from_checkpoint(last_good)
    assert meta["step"] == 4
    assert all(torch.isfinite(p).all() for p in model.parameters())
    run = tracking.read_run(
        config.tracking.tracking_uri, tracking.find_run_id(config.tracking.tracking_uri, "pretrain", "diverges")
    )
    assert run["status"] == "FAILED"


def test_validation_early_stop_records_converged_and_stops_every_worker(shards_dir, workdir):
    # tolerance 1.0: no check can improve by more than 100%, so patience 1 converges at the first check.
    config = tiny_config(
        shards_dir, workdir, run_name="converges", num_workers=1, micro_batch_size=None, steps=20,
        validation_every_steps=5, validation_patience=1, validation_tolerance=1.0, validation_stop=True,
        validation_fraction=0.3, validation_num_clips=8, rankme_every_steps=0, rankme_steps=(3,),
    )  # fmt: skip
    result = run_pretraining(config)
    assert result.steps == 5  # stopped at the first check, with a checkpoint there
    run = tracking.read_run(config.tracking.tracking_uri, result.run_id)
    assert run["tags"]["converged"] == "true" and run["tags"]["converged_step"] == "5"
    assert run["params"]["train_steps"] == "20" and "validation_mse" in run["metrics"]
    assert 3 in dict(result.rankme_history)  # an explicit --rankme-steps step


@pytest.mark.slow
def test_resume_past_a_truncated_newest_checkpoint(resumed_run, shards_dir, workdir, capfd):
    # Before: the damaged newest checkpoint failed every retry and every re-run, naming no file.
    _, second, _ = resumed_run
    weights = Path(second.checkpoint_dir) / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    capfd.readouterr()
    third = run_pretraining(tiny_config(shards_dir, workdir, steps=20))
    # Said on the user's terminal by the driver, not only in Ray's worker logs.
    said = [line for line in capfd.readouterr().err.splitlines() if line.startswith("resume: ")]
    assert len(said) == 2, said
    assert "checkpoint_step_00000016" in said[0] and "model.safetensors" in said[0]
    assert said[1].startswith("resume: resuming from ") and "checkpoint_step_00000012" in said[1]
    assert third.steps == 20 and third.run_id == second.run_id
    run = tracking.read_run(third.tracking_uri, third.run_id)
    assert run["metrics"]["resumed_from_step"][-1] == (12, 12.0)  # step 16 skipped, step 12 verified
    verify_checkpoint(third.checkpoint_dir)


def test_an_ema_teacher_follows_every_optimizer_step_on_every_worker(ray_local, tmp_path_factory, workdir):
    # t-mae-debug on 2 DDP workers: the loop calls after_optimizer_step once per step on each rank,
    # so the checkpoint's teacher has made exactly `steps` updates and moved away from its start.
    shards = make_tiny_shards(tmp_path_factory.getbasetemp(), preset_name="dasheng")
    config = tiny_config(
        shards, workdir, run_name="teacher", model_name="t-mae-debug", model_overrides={}, steps=6,
        checkpoint_every_steps=6, rankme_every_steps=0, rankme_steps=(6,), max_failures=0,
    )  # fmt: skip
    result = run_pretraining(config)
    model, meta = load_model_from_checkpoint(result.checkpoint_dir)
    assert meta["model_name"] == "t-mae-debug" and int(model.teacher_updates) == 6
    torch.manual_seed(0)
    start = build_model("t-mae-debug")  # the run's seed-0 initialisation
    assert not torch.equal(model.teacher.patch_embed.weight, start.teacher.patch_embed.weight)
    assert not torch.equal(model.teacher.patch_embed.weight, model.encoder.patch_embed.weight)
    assert torch.isfinite(model(torch.randn(2, model.spec.crop_frames, 64)).loss)
