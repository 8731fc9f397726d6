"""pipeline.checkpoint: the directory contract, weights_only loading, exact resume state."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest
import safetensors.torch
import torch
from torch import nn

from pipeline import checkpoint
from pipeline.pretrain.optim import build_optimizer, build_scheduler
from pipeline.tracking.runs import code_version


class TiedModel(nn.Module):
    """Tied input/output weights: safetensors' plain save_file refuses shared tensors."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Linear(6, 6)
        self.out = nn.Linear(6, 6)
        self.out.weight = self.embed.weight
        self.norm = nn.LayerNorm(6)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(self.norm(self.embed(x)))


def _save(tmp_path, model, **kwargs):
    defaults = dict(model_name="tied", overrides={"width": 6}, step=7, shard_fingerprint="abc123")
    return checkpoint.save_model_checkpoint(tmp_path / "ckpt", model, **{**defaults, **kwargs})


def test_directory_holds_safetensors_and_contract_metadata(tmp_path):
    directory = _save(tmp_path, TiedModel(), extra={"total_steps": 100})
    meta = json.loads((directory / "model.json").read_text())
    assert meta == {
        "model_name": "tied",
        "overrides": {"width": 6},
        "frontend_preset": None,
        "crop_frames": None,
        "step": 7,
        "shard_fingerprint": "abc123",
        "code_version": code_version(),
        "total_steps": 100,
        "sha256": {"model.safetensors": checkpoint.file_sha256(directory / "model.safetensors")},
        "bytes": {"model.safetensors": (directory / "model.safetensors").stat().st_size},
    }
    assert checkpoint.read_checkpoint_meta(directory) == meta
    assert "embed.weight" in safetensors.torch.load_file(directory / "model.safetensors")


def test_weights_round_trip_exactly_through_compile_wrapper(tmp_path):
    source = TiedModel()
    compiled = torch.compile(source)  # wraps without compiling until first call
    directory = _save(tmp_path, compiled)
    assert "_orig_mod.embed.weight" not in safetensors.torch.load_file(directory / "model.safetensors")
    target = TiedModel()
    checkpoint.load_model_weights(target, directory)
    for (name, a), (_, b) in zip(source.state_dict().items(), target.state_dict().items()):
        assert torch.equal(a, b), name
    assert target.out.weight is target.embed.weight


def test_mismatched_model_is_a_clear_error(tmp_path):
    directory = _save(tmp_path, TiedModel())
    with pytest.raises(checkpoint.CheckpointError, match="does not match the model"):
        checkpoint.load_model_weights(nn.Sequential(nn.Linear(6, 6)), directory)


def test_extra_metadata_cannot_overwrite_contract_keys(tmp_path):
    with pytest.raises(ValueError, match="step"):
        _save(tmp_path, TiedModel(), extra={"step": 3})


def test_non_checkpoint_directory_is_a_clear_error(tmp_path):
    with pytest.raises(checkpoint.CheckpointError, match="model.json is missing"):
        checkpoint.read_checkpoint_meta(tmp_path)
    with pytest.raises(checkpoint.CheckpointError, match="cannot be resumed"):
        checkpoint.load_train_state(tmp_path)


def _train_a_little(model, optimizer, scheduler, steps):
    for _ in range(steps):
        loss = model(torch.randn(4, 6)).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        scheduler.step()


def test_train_state_resumes_bit_exactly(tmp_path):
    torch.manual_seed(0)
    model = TiedModel()
    optimizer = build_optimizer(model, base_lr=1e-3, global_batch_size=256)
    scheduler = build_scheduler(optimizer, warmup_steps=2, total_steps=10)
    _train_a_little(model, optimizer, scheduler, 3)
    directory = _save(tmp_path, model, step=3)
    checkpoint.save_train_state(directory, optimizer=optimizer, scheduler=scheduler, step=3)
    _train_a_little(model, optimizer, scheduler, 3)  # the uninterrupted run, including its RNG draws
    expected = {k: v.clone() for k, v in model.state_dict().items()}

    resumed = TiedModel()
    resumed_optimizer = build_optimizer(resumed, base_lr=1e-3, global_batch_size=256)
    resumed_scheduler = build_scheduler(resumed_optimizer, warmup_steps=2, total_steps=10)
    checkpoint.load_model_weights(resumed, directory)
    state = checkpoint.load_train_state(directory)
    resumed_optimizer.load_state_dict(state["optimizer"])
    resumed_scheduler.load_state_dict(state["scheduler"])
    checkpoint.restore_rng_state(state["rng"])
    assert state["step"] == 3
    _train_a_little(resumed, resumed_optimizer, resumed_scheduler, 3)
    for name, value in resumed.state_dict().items():
        assert torch.equal(value, expected[name]), name


def test_train_state_needs_no_unpickling(tmp_path):
    model = TiedModel()
    optimizer = build_optimizer(model, base_lr=1e-3, global_batch_size=256)
    scheduler = build_scheduler(optimizer, warmup_steps=1, total_steps=4)
    _train_a_little(model, optimizer, scheduler, 1)
    path = checkpoint.save_train_state(tmp_path, optimizer=optimizer, scheduler=scheduler, step=1)
    state = torch.load(path, weights_only=True)  # raises on any non-allowlisted object
    assert set(state) == {"optimizer", "scheduler", "step", "rng"}


def test_rng_state_restores_python_numpy_and_torch(tmp_path):
    random.seed(1), np.random.seed(1), torch.manual_seed(1)
    state = checkpoint.capture_rng_state()
    torch.save(state, tmp_path / "rng.pt")
    expected = (random.random(), np.random.rand(), torch.rand(1).item())
    random.seed(2), np.random.seed(2), torch.manual_seed(2)
    checkpoint.restore_rng_state(torch.load(tmp_path / "rng.pt", weights_only=True))
    assert (random.random(), np.random.rand(), torch.rand(1).item()) == expected
