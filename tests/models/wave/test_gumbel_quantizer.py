"""The Gumbel product quantizer: perplexities and the diversity penalty by hand, codevector
selection, straight-through gradients, the temperature schedule."""

from __future__ import annotations

import math

import pytest
import torch

from models.wave.gumbel_quantizer import (
    GumbelProductQuantizer,
    TemperatureSchedule,
    diversity_penalty,
    perplexity,
)


def test_perplexity_counts_the_effectively_used_entries_per_group() -> None:
    # group 0 uses 4 entries uniformly, group 1 only one: exp(ln 4) + exp(0) = 5 (eps 1e-7 aside)
    probabilities = torch.tensor([[0.25, 0.25, 0.25, 0.25], [1.0, 0.0, 0.0, 0.0]])
    assert perplexity(probabilities).item() == pytest.approx(5.0, abs=1e-5)
    # G V = 8 codewords, 5 used: (8 - 5) / 8
    assert diversity_penalty(perplexity(probabilities), 8).item() == pytest.approx(0.375, abs=1e-6)


def test_diversity_penalty_is_zero_at_uniform_use_and_near_one_at_collapse() -> None:
    uniform = torch.full((2, 320), 1 / 320)
    collapsed = torch.zeros(2, 320)
    collapsed[:, 7] = 1.0
    assert diversity_penalty(perplexity(uniform), 640).item() == pytest.approx(0.0, abs=1e-4)
    assert diversity_penalty(perplexity(collapsed), 640).item() == pytest.approx(638 / 640, abs=1e-6)


def _quantizer() -> GumbelProductQuantizer:
    torch.manual_seed(0)
    return GumbelProductQuantizer(3, groups=2, entries=4, codevector_dim=6)


def test_prob_perplexity_uses_the_batch_mean_softmax_of_each_group() -> None:
    quantizer = _quantizer().eval()
    x = torch.randn(5, 3)
    logits = (x @ quantizer.logits.weight.T + quantizer.logits.bias).view(5, 2, 4)
    mean_probabilities = logits.softmax(-1).mean(0)  # (2 groups, 4 entries)
    expected = sum(math.exp(-sum(p * math.log(p + 1e-7) for p in group.tolist())) for group in mean_probabilities)
    assert quantizer(x).prob_perplexity.item() == pytest.approx(expected, rel=1e-5)


def test_eval_picks_the_argmax_entry_of_each_codebook_and_concatenates() -> None:
    quantizer = _quantizer().eval()
    x = torch.randn(7, 3)
    out = quantizer(x)
    logits = quantizer.logits(x).view(7, 2, 4)
    codes = logits.argmax(-1)
    books = quantizer.codebooks.view(2, 4, 3)  # d / G = 3 per entry
    expected = torch.cat([books[0, codes[:, 0]], books[1, codes[:, 1]]], dim=-1)
    assert torch.equal(out.codes, codes)
    torch.testing.assert_close(out.vectors, expected)
    # code perplexity from argmax counts: 7 frames, so at most 7 entries per group
    assert 2.0 <= out.code_perplexity.item() <= 8.0


def test_training_output_is_a_hard_codebook_row_with_gradient_to_the_logits() -> None:
    quantizer = _quantizer().train()
    x = torch.randn(6, 3)
    out = quantizer(x)
    books = quantizer.codebooks.view(2, 4, 3)
    for row in out.vectors.view(6, 2, 3):
        for group in range(2):  # each half is exactly one entry of its codebook
            assert (books[group] - row[group]).abs().sum(-1).min().item() == pytest.approx(0.0, abs=1e-6)
    out.vectors.sum().backward()  # straight-through: the soft probabilities carry the gradient
    assert quantizer.logits.weight.grad.abs().sum() > 0
    assert quantizer.codebooks.grad.abs().sum() > 0


def test_temperature_decays_from_two_by_0_999995_per_step_to_the_floor() -> None:
    schedule = TemperatureSchedule(start=2.0, floor=0.5, decay_per_step=0.999995)
    assert schedule.at(0) == 2.0
    halving = round(math.log(0.5) / math.log(0.999995))  # 138,629 updates halve it
    assert schedule.at(halving) == pytest.approx(1.0, rel=1e-5)
    assert schedule.at(400_000) == 0.5  # 2 x 0.999995^400k = 0.27: clamped (Base's 400k updates)
    assert TemperatureSchedule(floor=0.1).at(400_000) == pytest.approx(0.2707, abs=1e-4)


def test_step_buffer_drives_the_temperature_and_is_saved() -> None:
    quantizer = _quantizer()
    quantizer.set_step(138_629)
    assert quantizer.current_temperature == pytest.approx(1.0, rel=1e-5)
    quantizer.advance_step()
    assert int(quantizer.state_dict()["step"]) == 138_630
    with pytest.raises(ValueError, match="step=-1"):
        quantizer.set_step(-1)
