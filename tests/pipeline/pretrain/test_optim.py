"""Every optimisation rule of pipeline.pretrain.optim, on a small real module."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from pipeline.pretrain.optim import (
    ADAMW_BETAS,
    build_optimizer,
    build_scheduler,
    lr_factor,
    scaled_learning_rate,
    split_weight_decay_groups,
    warmup_cosine_factor,
)


class TinyMaskedModel(nn.Module):
    """The parameter kinds a real encoder has: matrices, biases, norms, tokens, a 1-D gate."""

    def __init__(self, lr_scale: float = 1.0) -> None:
        super().__init__()
        self.pos_embed = nn.Parameter(torch.zeros(1, 4, 8))
        self.cls_token = nn.Parameter(torch.zeros(1, 1, 8))
        self.proj = nn.Linear(8, 8)
        self.norm = nn.LayerNorm(8)
        self.rms = nn.RMSNorm(8)
        self.gate = nn.Parameter(torch.ones(8))
        self.head = nn.Linear(8, 8, bias=False)
        self.frozen = nn.Parameter(torch.zeros(8, 8), requires_grad=False)
        self.lr_scale = lr_scale

    def no_weight_decay_names(self) -> set[str]:
        return {"pos_embed", "cls_token"}

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.rms(self.norm(self.proj(x + self.pos_embed + self.cls_token)) * self.gate))


def test_weight_decay_only_on_matrices_that_are_not_tokens():
    decay, no_decay = split_weight_decay_groups(TinyMaskedModel())
    assert sorted(decay) == ["head.weight", "proj.weight"]
    assert sorted(no_decay) == sorted(
        ["pos_embed", "cls_token", "proj.bias", "norm.weight", "norm.bias", "rms.weight", "gate"]
    )


def test_named_tokens_are_exempt_behind_ddp_style_wrapper():
    wrapper = nn.Module()
    wrapper.module = TinyMaskedModel()
    decay, no_decay = split_weight_decay_groups(wrapper)
    assert "module.pos_embed" in no_decay and "module.cls_token" in no_decay
    assert sorted(decay) == ["module.head.weight", "module.proj.weight"]


def test_frozen_parameters_are_left_out():
    decay, no_decay = split_weight_decay_groups(TinyMaskedModel())
    assert "frozen" not in decay + no_decay


def test_optimizer_is_adamw_with_mae_betas_and_default_decay():
    optimizer = build_optimizer(TinyMaskedModel(), base_lr=1.5e-4, global_batch_size=256)
    assert isinstance(optimizer, torch.optim.AdamW)
    decay_group, no_decay_group = optimizer.param_groups
    assert decay_group["betas"] == ADAMW_BETAS == (0.9, 0.95)
    assert decay_group["weight_decay"] == 0.05
    assert no_decay_group["weight_decay"] == 0.0
    assert len(decay_group["params"]) == 2 and len(no_decay_group["params"]) == 7


def test_peak_lr_follows_linear_scaling_rule():
    # AudioMAE++: 1.5e-4 x 1024 / 256 = 6e-4.
    assert scaled_learning_rate(base_lr=1.5e-4, global_batch_size=1024) == pytest.approx(6e-4)
    optimizer = build_optimizer(TinyMaskedModel(), base_lr=1.5e-4, global_batch_size=1024)
    assert optimizer.param_groups[0]["lr"] == pytest.approx(6e-4)


def test_peak_lr_includes_crossmae_gamma_over_p():
    # CrossMAE with prediction ratio 0.25 of mask ratio 0.75 scales the lr by 1/3.
    optimizer = build_optimizer(TinyMaskedModel(lr_scale=0.25 / 0.75), base_lr=1.5e-4, global_batch_size=256)
    assert optimizer.param_groups[0]["lr"] == pytest.approx(1.5e-4 / 3)


def test_non_positive_lr_inputs_are_rejected():
    with pytest.raises(ValueError, match="global_batch_size"):
        scaled_learning_rate(base_lr=1e-4, global_batch_size=0)


def test_warmup_is_linear_to_the_peak():
    factors = [warmup_cosine_factor(s, warmup_steps=4, total_steps=20) for s in range(4)]
    assert factors == pytest.approx([0.25, 0.5, 0.75, 1.0])


def test_cosine_decays_from_peak_to_min_ratio():
    kwargs = dict(warmup_steps=10, total_steps=110, min_lr_ratio=0.1)
    assert warmup_cosine_factor(9, **kwargs) == pytest.approx(1.0)
    # Halfway through the decay the cosine is at the midpoint between peak and floor.
    assert warmup_cosine_factor(59, **kwargs) == pytest.approx(0.55)
    assert warmup_cosine_factor(109, **kwargs) == pytest.approx(0.1)  # the last step
    assert warmup_cosine_factor(500, **kwargs) == pytest.approx(0.1)
    decay = [warmup_cosine_factor(s, **kwargs) for s in range(9, 111)]
    assert all(a >= b for a, b in zip(decay, decay[1:]))


def test_scheduler_drives_optimizer_lr_per_step():
    model = TinyMaskedModel()
    optimizer = build_optimizer(model, base_lr=2.56e-4, global_batch_size=256)
    scheduler = build_scheduler(optimizer, warmup_steps=2, total_steps=6)
    seen = []
    for _ in range(6):
        seen.append(optimizer.param_groups[0]["lr"])
        model(torch.randn(2, 4, 8)).sum().backward()
        optimizer.step()
        scheduler.step()
    peak = 2.56e-4
    expected = [peak * 0.5, peak] + [peak * 0.5 * (1 + math.cos(math.pi * k / 4)) for k in range(1, 5)]
    assert seen[-1] == 0.0  # the cosine ends exactly at the floor on the last step
    assert seen == pytest.approx(expected)


def test_scheduler_state_survives_weights_only_round_trip(tmp_path):
    model = TinyMaskedModel()
    optimizer = build_optimizer(model, base_lr=1e-4, global_batch_size=256)
    scheduler = build_scheduler(optimizer, warmup_steps=3, total_steps=10)
    for _ in range(5):
        optimizer.step()
        scheduler.step()
    torch.save(scheduler.state_dict(), tmp_path / "sched.pt")
    fresh_optimizer = build_optimizer(TinyMaskedModel(), base_lr=1e-4, global_batch_size=256)
    fresh = build_scheduler(fresh_optimizer, warmup_steps=3, total_steps=10)
    fresh.load_state_dict(torch.load(tmp_path / "sched.pt", weights_only=True))
    assert fresh.last_epoch == 5
    assert fresh.get_last_lr() == pytest.approx(scheduler.get_last_lr())


def test_bad_schedule_arguments_are_rejected():
    optimizer = build_optimizer(TinyMaskedModel(), base_lr=1e-4, global_batch_size=256)
    with pytest.raises(ValueError, match="min_lr_ratio"):
        build_scheduler(optimizer, warmup_steps=1, total_steps=10, min_lr_ratio=1.5)


def test_peak_lr_is_used_as_given_without_batch_scaling():
    # The RankMe study's 3e-4 is a peak at batch 256 (App. B), not a base to rescale.
    optimizer = build_optimizer(TinyMaskedModel(), base_lr=1.5e-4, global_batch_size=1024, peak_lr=3e-4)
    assert all(group["lr"] == pytest.approx(3e-4) for group in optimizer.param_groups)


def test_8bit_adamw_falls_back_to_adamw_with_a_note_without_bitsandbytes_or_gpu():
    from pipeline.pretrain.optim import optimizer_choice

    used, note = optimizer_choice("adamw8bit", device_type="cpu")
    assert used == "adamw" and "8-bit AdamW requested" in note and "no GPU" in note
    assert optimizer_choice("adamw", device_type="cuda") == ("adamw", "")


def test_cosine_floor_is_ten_percent_of_the_peak_at_the_last_step():
    # App. B: warmup, then decayed "to 10% of its maximum value".
    assert warmup_cosine_factor(999, warmup_steps=30, total_steps=1000, min_lr_ratio=0.1) == pytest.approx(0.1)
    assert warmup_cosine_factor(29, warmup_steps=30, total_steps=1000, min_lr_ratio=0.1) == pytest.approx(1.0)


def test_betas_epsilon_and_decay_on_every_parameter_as_dashengs_training():
    # Dasheng (dasheng/train/train.py): AdamW8bit(model.parameters(), lr, weight_decay) with the library's
    # betas (0.9, 0.999): one group, nothing exempt.
    optimizer = build_optimizer(
        TinyMaskedModel(), base_lr=1.5e-4, global_batch_size=256, weight_decay=0.01, betas=(0.9, 0.999),
        eps=1e-6, decay_all=True,
    )  # fmt: skip
    decay_group, no_decay_group = optimizer.param_groups
    assert decay_group["betas"] == (0.9, 0.999) and decay_group["eps"] == 1e-6
    assert decay_group["weight_decay"] == 0.01 and len(decay_group["params"]) == 9
    assert no_decay_group["params"] == []


def test_linear_and_constant_schedules_after_the_same_warmup():
    # wav2vec 2.0 Sec. 4.2 / HuBERT Sec. IV-C: warm up over 8% of updates, then decay linearly to 0.
    kwargs = {"warmup_steps": 8, "total_steps": 100}
    assert lr_factor(3, kind="linear", **kwargs) == warmup_cosine_factor(3, **kwargs) == pytest.approx(0.5)
    assert lr_factor(7, kind="linear", **kwargs) == pytest.approx(1.0)
    assert lr_factor(53, kind="linear", **kwargs) == pytest.approx(1.0 - 46 / 92)  # halfway through the decay
    assert lr_factor(99, kind="linear", **kwargs) == pytest.approx(0.0)
    assert lr_factor(99, kind="linear", min_lr_ratio=0.1, **kwargs) == pytest.approx(0.1)
    assert lr_factor(60, kind="constant", **kwargs) == 1.0 and lr_factor(2, kind="constant", **kwargs) < 1.0
    with pytest.raises(ValueError, match="unknown lr schedule"):
        build_scheduler(torch.optim.SGD([nn.Parameter(torch.zeros(1))], lr=1.0), kind="step", **kwargs)
