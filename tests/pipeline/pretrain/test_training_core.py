"""The Ray-free training core: what a run builds, steps and saves, resumed from a folder alone."""

from __future__ import annotations

import itertools

import torch

from pipeline.pretrain.config import PretrainConfig
from pipeline.pretrain.training_core import build_training_state, save_training_state, take_step

CPU = torch.device("cpu")


def _config(**changes) -> PretrainConfig:
    settings = dict(model_name="mae-debug", global_batch_size=4, steps=4, warmup_steps=1, peak_lr=1e-3,
                    optimizer="adamw", precision="fp32")  # fmt: skip
    return PretrainConfig.from_flat(**{**settings, **changes})


def _batches(state) -> itertools.repeat:
    spec = state.model.spec
    return itertools.repeat(torch.randn(4, spec.crop_frames, spec.n_mels, generator=torch.Generator().manual_seed(3)))


def test_a_run_resumed_from_a_saved_folder_continues_as_if_uninterrupted(tmp_path):
    config = _config()
    whole = build_training_state(config, CPU)
    batches = _batches(whole)
    losses = [take_step(whole, batches, config=config, step=step, device=CPU).mean_loss for step in range(1, 5)]
    assert losses[0] > losses[-1]  # the steps train

    first = build_training_state(config, CPU)
    batches = _batches(first)
    for step in (1, 2):
        take_step(first, batches, config=config, step=step, device=CPU)
    save_training_state(tmp_path / "ckpt", first, config=config, step=2, data_position={"rows": 8})
    resumed = build_training_state(config, CPU, resume_from=tmp_path / "ckpt")
    assert resumed.start_step == 2 and resumed.saved_data_position == {"rows": 8}
    batches = _batches(resumed)
    tail = [take_step(resumed, batches, config=config, step=step, device=CPU).mean_loss for step in (3, 4)]
    assert tail == losses[2:]  # weights, optimizer moments, schedule and masks all came back
    for name, value in whole.model.state_dict().items():
        assert torch.equal(value, resumed.model.state_dict()[name]), name


def test_a_non_finite_loss_skips_the_update_and_reads_nan():
    config = _config()
    state = build_training_state(config, CPU)
    # Parameters, not buffers: the NaN batch did pass through the forward (a BatchNorm's running
    # statistics saw it), which is why the run stops at this step rather than going on.
    before = {name: value.detach().clone() for name, value in state.model.named_parameters()}
    spec = state.model.spec
    poisoned = itertools.repeat(torch.full((4, spec.crop_frames, spec.n_mels), float("nan")))
    outcome = take_step(state, poisoned, config=config, step=1, device=CPU)
    assert outcome.non_finite and outcome.mean_loss != outcome.mean_loss  # NaN, not the reduced 0
    after = dict(state.model.named_parameters())
    assert all(torch.equal(value, after[name]) for name, value in before.items())
    assert state.scheduler.last_epoch == 0  # the schedule did not advance either


def test_the_core_builds_what_the_config_asks():
    state = build_training_state(_config(weight_decay=0.1, optimizer="adamw8bit"), CPU)
    # No GPU: the study's 8-bit AdamW falls back to plain AdamW, and says so.
    assert state.optimizer_used == "adamw" and "no GPU" in state.optimizer_note
    assert {group["weight_decay"] for group in state.optimizer.param_groups} >= {0.1}
    assert state.train_model is state.model and state.start_step == 0
