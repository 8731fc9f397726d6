"""Running statistics re-estimated on fixed inputs: the exact average over the set, whatever came before."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from models.running_stats import has_running_stats, kept_running_stats, reestimate_running_stats


class Normalised(nn.Module):
    """(batch, channels, time) -> BatchNorm over channels -> dropout -> linear, like an input BatchNorm."""

    def __init__(self) -> None:
        super().__init__()
        self.norm = nn.BatchNorm1d(3, momentum=0.01)
        self.dropout = nn.Dropout(0.5)
        self.head = nn.Linear(3, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.dropout(self.norm(x)).transpose(1, 2))


def _batches(seed: int = 0, count: int = 4) -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    return [
        torch.randn(5, 3, 7, generator=generator) * torch.tensor([1.0, 2.0, 0.5])[:, None] + 3 for _ in range(count)
    ]


def test_the_statistics_are_the_equal_weight_average_of_the_batches():
    model, batches = Normalised(), _batches()
    assert reestimate_running_stats(model, batches, model) == 4
    means = torch.stack([b.mean(dim=(0, 2)) for b in batches]).mean(0)
    variances = torch.stack([b.transpose(0, 1).reshape(3, -1).var(dim=1, unbiased=True) for b in batches]).mean(0)
    torch.testing.assert_close(model.norm.running_mean, means)
    torch.testing.assert_close(model.norm.running_var, variances)
    assert model.norm.momentum == 0.01  # the layer's own momentum is back for training


def test_two_histories_give_the_same_statistics_and_the_same_outputs():
    torch.manual_seed(0)
    first = Normalised()
    second = Normalised()
    second.load_state_dict(first.state_dict())
    second.train()
    for batch in _batches(seed=5, count=30):  # a training history the first model never saw
        second(batch * 4 - 1)
    assert not torch.allclose(first.norm.running_mean, second.norm.running_mean)
    for model in (first, second):
        reestimate_running_stats(model.eval(), _batches(), model)
    torch.testing.assert_close(first.norm.running_mean, second.norm.running_mean, rtol=0, atol=0)
    probe = _batches(seed=9, count=1)[0]
    torch.testing.assert_close(first(probe), second(probe), rtol=0, atol=0)


def test_modes_are_restored_and_dropout_stays_off_during_the_pass():
    model = Normalised().train()
    seen = []
    model.dropout.register_forward_hook(lambda module, inputs, output: seen.append(module.training))
    reestimate_running_stats(model, _batches(), model)
    assert seen == [False] * 4 and model.training and model.norm.training and model.dropout.training
    model.eval()
    reestimate_running_stats(model, _batches(), model)
    assert not model.training and not model.norm.training


def test_kept_running_stats_undoes_the_block():
    model = Normalised()
    reestimate_running_stats(model, _batches(seed=1), model)
    before = (model.norm.running_mean.clone(), model.norm.running_var.clone(), int(model.norm.num_batches_tracked))
    with kept_running_stats(model):
        reestimate_running_stats(model, _batches(seed=2), model)
        assert not torch.equal(model.norm.running_mean, before[0])
    assert torch.equal(model.norm.running_mean, before[0]) and torch.equal(model.norm.running_var, before[1])
    assert int(model.norm.num_batches_tracked) == before[2] and model.norm.momentum == 0.01


def test_no_batches_is_refused_before_anything_is_reset():
    model = Normalised()
    reestimate_running_stats(model, _batches(), model)
    mean = model.norm.running_mean.clone()
    with pytest.raises(ValueError, match="at least one batch"):
        reestimate_running_stats(model, [], model)
    assert torch.equal(model.norm.running_mean, mean)


def test_a_model_without_running_statistics_is_left_alone():
    model = nn.Sequential(nn.Linear(3, 3), nn.LayerNorm(3))
    assert not has_running_stats(model)
    state = {k: v.clone() for k, v in model.state_dict().items()}
    assert reestimate_running_stats(model, iter(()), model) == 0  # nothing read, nothing refused
    assert all(torch.equal(state[k], v) for k, v in model.state_dict().items())


def test_a_layer_the_readout_does_not_reach_keeps_its_statistics():
    class WithTeacher(Normalised):
        def __init__(self) -> None:
            super().__init__()
            self.teacher_norm = nn.BatchNorm1d(3)  # like an EMA teacher's input BatchNorm: not in the readout

    model = WithTeacher()
    model.teacher_norm.running_mean.fill_(7.0)
    reestimate_running_stats(model, _batches(), model)
    assert torch.all(model.teacher_norm.running_mean == 7.0) and model.teacher_norm.momentum == 0.1
    assert not torch.all(model.norm.running_mean == 0)
