"""`--rankme-shards` whose log-mels the checkpoint's model cannot read: one line naming the flag, the
folder, its bins and the model's, exit code 2, before the model measures anything (an axlstm
checkpoint given 64-bin shards used to fail deep inside the model: `expects mel shaped
(batch, time, 80) ..., got (64, 200, 64)`, naming neither)."""

from __future__ import annotations

import pytest
import torch

import models
from pipeline.checkpoint import save_model_checkpoint
from tests.pipeline.cli.test_errors import assert_one_line_error, run_cli
from tests.support.hear_task_fixtures import build_tiny_tasks
from tests.support.waveform_pool_fixtures import write_audio_shards

MODEL = "axlstm-debug"  # the audiomae front end: 80 mel bins


@pytest.fixture()
def axlstm_checkpoint(tmp_path):
    torch.manual_seed(0)
    model = models.build_model(MODEL)
    assert (model.spec.frontend_preset, model.spec.n_mels) == ("audiomae", 80)
    return save_model_checkpoint(
        tmp_path / "ckpt", model, model_name=MODEL, overrides={}, step=3, shard_fingerprint="t"
    )


def test_shards_of_another_front_end_are_named_before_the_model_reads_them(axlstm_checkpoint, tmp_path):
    shards, _ = write_audio_shards(tmp_path / "pool64", preset_name="dasheng")  # 64-bin log-mels
    tasks = build_tiny_tasks(tmp_path / "tasks", clips_per_class={"train": 2, "valid": 1, "test": 1})
    completed = run_cli(
        "pipeline.evaluate", "--checkpoint", str(axlstm_checkpoint), "--rankme-shards", str(shards),
        "--tasks-dir", str(tasks), "--no-mlflow", "--probe", "linear", "--seeds", "1", "--workers", "1",
    )  # fmt: skip
    assert_one_line_error(completed, f"--rankme-shards {shards}", "64-bin 'dasheng'", "80-bin 'audiomae'", MODEL)
    assert "--preset audiomae" in completed.stderr  # what to do
    assert "expects mel shaped" not in completed.stderr
