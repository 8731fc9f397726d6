"""Checkpoint digests: recorded at save, checked at load; resume falls back past a damaged checkpoint."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pyarrow.fs as pafs
import pytest
import torch
from torch import nn

from pipeline import checkpoint
from pipeline.pretrain.optim import build_optimizer, build_scheduler
from pipeline.pretrain.resume import newest_verified_checkpoint, resume_directory


def _write_checkpoint(directory, step: int, seed: int = 0):
    """A real checkpoint folder written by the loop's two save functions."""
    torch.manual_seed(seed)
    model = nn.Sequential(nn.Linear(8, 16), nn.LayerNorm(16), nn.Linear(16, 8))
    optimizer = build_optimizer(model, base_lr=1e-3, global_batch_size=256)
    scheduler = build_scheduler(optimizer, warmup_steps=1, total_steps=10)
    model(torch.randn(4, 8)).pow(2).mean().backward()
    optimizer.step()
    scheduler.step()
    checkpoint.save_model_checkpoint(directory, model, model_name="toy", overrides={}, step=step, shard_fingerprint="f")
    checkpoint.save_train_state(directory, optimizer=optimizer, scheduler=scheduler, step=step)
    return model


def _zero_middle(path):
    data = bytearray(path.read_bytes())
    middle = len(data) // 2
    data[middle : middle + 64] = bytes(64)
    path.write_bytes(bytes(data))


def _truncate(path):
    path.write_bytes(path.read_bytes()[: path.stat().st_size - 100])


def test_digests_of_weights_and_train_state_are_recorded_at_save(tmp_path):
    _write_checkpoint(tmp_path / "c", step=1)
    digests = json.loads((tmp_path / "c" / "model.json").read_text())["sha256"]
    assert digests == {
        name: checkpoint.file_sha256(tmp_path / "c" / name) for name in ("model.safetensors", "train_state.pt")
    }


@pytest.mark.parametrize("damage", [_zero_middle, _truncate])
def test_damaged_weights_are_an_error_naming_the_file(tmp_path, damage):
    model = _write_checkpoint(tmp_path / "c", step=1)
    damage(tmp_path / "c" / "model.safetensors")
    with pytest.raises(checkpoint.CheckpointError, match=r"c/model\.safetensors is damaged.*earlier checkpoint"):
        checkpoint.load_model_weights(model, tmp_path / "c")


def test_damaged_train_state_is_an_error_naming_the_file(tmp_path):
    _write_checkpoint(tmp_path / "c", step=1)
    _zero_middle(tmp_path / "c" / "train_state.pt")
    with pytest.raises(checkpoint.CheckpointError, match=r"c/train_state\.pt is damaged"):
        checkpoint.load_train_state(tmp_path / "c")


def test_truncated_model_json_names_the_file(tmp_path):
    _write_checkpoint(tmp_path / "c", step=1)
    (tmp_path / "c" / "model.json").write_text('{"model_name": "to')
    with pytest.raises(checkpoint.CheckpointError, match=r"c/model\.json is damaged"):
        checkpoint.read_checkpoint_meta(tmp_path / "c")


def test_resume_skips_a_truncated_newest_checkpoint_and_says_so(tmp_path):
    run = tmp_path / "run"
    for step in (4, 8, 12):
        _write_checkpoint(run / f"checkpoint_step_{step:08d}", step=step, seed=step)
    _truncate(run / "checkpoint_step_00000012" / "model.safetensors")
    chosen, skipped = newest_verified_checkpoint(sorted(run.iterdir()))
    assert chosen == run / "checkpoint_step_00000008"
    assert [path.name for path, _ in skipped] == ["checkpoint_step_00000012"]
    assert "model.safetensors is damaged" in skipped[0][1]

    said = []
    latest = SimpleNamespace(path=str(run / "checkpoint_step_00000012"), filesystem=pafs.LocalFileSystem())
    with resume_directory(latest, say=said.append) as directory:
        assert checkpoint.load_train_state(directory)["step"] == 8
    assert len(said) == 2 and "skipping checkpoint" in said[0] and "checkpoint_step_00000012" in said[0]
    assert "checkpoint_step_00000008" in said[1]


def test_resume_with_no_verifying_checkpoint_lists_every_one(tmp_path):
    run = tmp_path / "run"
    for step in (4, 8):
        _write_checkpoint(run / f"checkpoint_step_{step:08d}", step=step)
        _zero_middle(run / f"checkpoint_step_{step:08d}" / "train_state.pt")
    latest = SimpleNamespace(path=str(run / "checkpoint_step_00000008"), filesystem=pafs.LocalFileSystem())
    with pytest.raises(checkpoint.CheckpointError, match="no checkpoint of this run verifies.*00000008.*00000004"):
        with resume_directory(latest, say=lambda line: None):
            pass


def test_the_driver_says_before_training_which_checkpoint_a_rerun_skips(tmp_path):
    from pipeline.pretrain.resume import announce_resume_point

    run = tmp_path / "run-a" / "TorchTrainer_x"
    for step in (8, 12, 16):
        _write_checkpoint(run / f"checkpoint_step_{step:08d}", step, seed=step)
    _truncate(run / "checkpoint_step_00000016" / "model.safetensors")
    said = []
    announce_resume_point(str(tmp_path), "run-a", say=said.append)
    assert len(said) == 2
    assert said[0].startswith(f"resume: skipping checkpoint {run / 'checkpoint_step_00000016'}: ")
    assert "model.safetensors" in said[0]
    assert (
        said[1] == f"resume: resuming from {run / 'checkpoint_step_00000012'} instead (1 newer checkpoint(s) skipped)"
    )
    quiet = []
    announce_resume_point(str(tmp_path), "never-ran", say=quiet.append)
    assert quiet == []
    _write_checkpoint(run / "checkpoint_step_00000020", 20, seed=20)
    whole = []
    announce_resume_point(str(tmp_path), "run-a", say=whole.append)
    assert whole == [f"resume: resuming run 'run-a' from step 20 ({run / 'checkpoint_step_00000020'})"]
