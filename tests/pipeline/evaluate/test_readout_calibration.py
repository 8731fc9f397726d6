"""A model whose weights never change reads out the same at every checkpoint: its running statistics
are re-estimated on the study's calibration crops before R and Q are measured.

The frozen model is a real pipeline run (Ray Train, the study MAE with Dasheng's input BatchNorm,
tiny espeak-ng shards) at `--peak-lr 0`: training moves only the BatchNorm's running statistics.
Read out with the statistics as saved ("recorded"), step 0 and the last step differ; re-estimated
("calibrated", the default), they are equal, in R on the RankMe pool, in RankMe during training,
in every task embedding and in Q.
"""

from __future__ import annotations

import json
import math
import shutil

import numpy as np
import pytest
import torch

from pipeline.checkpoint import load_model_from_checkpoint, read_checkpoint_meta
from pipeline.evaluate.probes.scene import scene_probe
from pipeline.evaluate.run import evaluate_checkpoint
from pipeline.evaluate.task_jobs import load_embedder
from pipeline.pretrain.driver import PretrainConfig, run_pretraining
from pipeline.rankme.model_rankme import RANKME_DECIMALS, TRAINING_RANKME_KEY, measure_pool_rankme
from pipeline.rankme.pool import select_pool
from tests.support.hear_task_fixtures import build_tiny_tasks
from tests.support.pretrain_testdata import make_tiny_shards

pytestmark = pytest.mark.ray

STEPS = 16


@pytest.fixture(scope="module")
def frozen_run(ray_local, tmp_path_factory):
    shards = make_tiny_shards(tmp_path_factory.getbasetemp(), preset_name="dasheng")
    work = tmp_path_factory.mktemp("frozen")
    config = PretrainConfig.from_flat(
        model_name="mae-debug", shards_dir=str(shards), steps=STEPS, global_batch_size=8, micro_batch_size=8,
        num_workers=1, cpus_per_worker=1, peak_lr=0.0, warmup_steps=2, log_every_steps=4,
        checkpoint_every_steps=STEPS, checkpoint_steps=(0, STEPS), rankme_every_steps=8, rankme_n=32,
        run_name="frozen", storage_path=str(work / "ray_results"), tracking_uri=f"sqlite:///{work / 'mlflow.db'}",
        max_failures=0,
    )  # fmt: skip
    result = run_pretraining(config)
    checkpoints = dict(result.checkpoints)
    return result, checkpoints[0], checkpoints[STEPS]


@pytest.fixture(scope="module")
def tasks_dir(tmp_path_factory):
    return build_tiny_tasks(tmp_path_factory.mktemp("tasks"))


def test_lr_zero_changes_no_weight_but_moves_the_input_statistics(frozen_run):
    _, first, last = frozen_run
    start, _ = load_model_from_checkpoint(first)
    end, _ = load_model_from_checkpoint(last)
    for (name, before), after in zip(start.named_parameters(), end.parameters(), strict=True):
        assert torch.equal(before, after), f"{name} changed at peak lr 0"
    moved = (end.encoder.input_norm.running_mean - start.encoder.input_norm.running_mean).abs().max()
    assert float(moved) > 0.05  # 16 batches at momentum 0.01 pull the mean ~15% of the way to the data's


def _evaluate(checkpoint, tasks_dir, readout_stats, workers=1):
    return evaluate_checkpoint(
        checkpoint, tasks_dir=tasks_dir, probe_training=scene_probe("knn"), rankme_n=32, task_rankme_n=40,
        readout_stats=readout_stats, workers=workers,
    )  # fmt: skip


def test_recorded_statistics_read_out_step_0_and_the_last_step_differently(frozen_run, tasks_dir):
    _, first, last = frozen_run
    start, end = _evaluate(first, tasks_dir, "recorded"), _evaluate(last, tasks_dir, "recorded")
    assert start.readout_stats == end.readout_stats == "recorded"
    assert abs(start.rankme - end.rankme) > 1e-3
    assert abs(start.task_rankme - end.task_rankme) > 1e-3


def test_calibrated_statistics_read_out_equal_weights_equally_at_every_checkpoint(frozen_run, tasks_dir):
    _, first, last = frozen_run
    start, end = _evaluate(first, tasks_dir, "calibrated"), _evaluate(last, tasks_dir, "calibrated", workers=2)
    assert start.readout_stats == end.readout_stats == "calibrated"
    assert math.isclose(start.rankme, end.rankme, rel_tol=1e-6)
    assert math.isclose(start.task_rankme, end.task_rankme, rel_tol=1e-6)  # every task clip embedded alike
    assert start.q == end.q  # the kNN probe is deterministic: equal embeddings, equal predictions
    np.testing.assert_allclose(start.q_replicates, end.q_replicates, atol=0)


def test_training_rankme_is_measured_with_the_calibrated_readout(frozen_run):
    result, _, _ = frozen_run
    assert [step for step, _ in result.rankme_history] == [0, 8, STEPS]
    values = [value for _, value in result.rankme_history]
    assert max(values) - min(values) < 1e-5 * max(values), values


def test_evaluation_takes_the_r_training_measured_at_that_checkpoint(frozen_run, tasks_dir, tmp_path):
    result, _, last = frozen_run
    recorded = read_checkpoint_meta(last)[TRAINING_RANKME_KEY]
    assert recorded["step"] == STEPS and recorded["readout"] == "calibrated" and recorded["n"] == 32
    # The value training logged at that step (to RANKME_DECIMALS: what the MLflow UI shows).
    assert dict(result.rankme_history)[STEPS] == round(recorded["value"], RANKME_DECIMALS)
    # Measured again here, on the same pool through the same calibrated readout: the same number.
    embedder, meta = load_embedder(last, "cpu")
    pool = select_pool(meta["pretrain_config"]["shards_dir"], crop_frames=meta["crop_frames"], n=32)
    assert pool.fingerprint == recorded["pool"]
    assert math.isclose(measure_pool_rankme(embedder.model, pool, device="cpu").value, recorded["value"], rel_tol=1e-9)
    # Evaluation takes the recorded value (a planted one shows it is not measured again) only for the
    # same readout: read out with the statistics as saved, R is measured.
    planted = tmp_path / "planted"
    shutil.copytree(last, planted)
    meta_file = planted / "model.json"
    written = json.loads(meta_file.read_text())
    written[TRAINING_RANKME_KEY]["value"] = 12.5
    meta_file.write_text(json.dumps(written))
    assert _evaluate(planted, tasks_dir, "calibrated").rankme == 12.5
    assert not math.isclose(_evaluate(planted, tasks_dir, "recorded").rankme, 12.5, rel_tol=1e-3)


def test_a_checkpoint_between_rankme_steps_records_no_r(ray_local, tmp_path):
    shards = make_tiny_shards(tmp_path, preset_name="dasheng")
    config = PretrainConfig.from_flat(
        model_name="mae-debug", shards_dir=str(shards), steps=4, global_batch_size=8, micro_batch_size=8,
        num_workers=1, cpus_per_worker=1, warmup_steps=1, log_every_steps=2, checkpoint_every_steps=4,
        checkpoint_steps=(2, 4), rankme_every_steps=0, rankme_steps=(1,), rankme_n=32, run_name="between",
        storage_path=str(tmp_path / "ray_results"), tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}", max_failures=0,
    )  # fmt: skip
    checkpoints = dict(run_pretraining(config).checkpoints)
    assert TRAINING_RANKME_KEY not in read_checkpoint_meta(checkpoints[2])  # R was measured at 1, not 2
    assert read_checkpoint_meta(checkpoints[4])[TRAINING_RANKME_KEY]["step"] == 4  # the last step always
