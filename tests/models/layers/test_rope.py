from __future__ import annotations

import torch

import models
from models.layers.rope import apply_rotary, rotary_angles


def _score(q: torch.Tensor, k: torch.Tensor, q_pos: list[int], k_pos: list[int]) -> float:
    positions = torch.tensor([[q_pos, k_pos]])  # (1, 2 tokens, n_axes)
    angles = rotary_angles(positions, head_dim=q.shape[-1])
    pair = apply_rotary(torch.stack([q, k])[None, None], angles)[0, 0]  # (2, head_dim)
    return float(pair[0] @ pair[1])


def test_scores_depend_only_on_relative_position_1d() -> None:
    torch.manual_seed(0)
    q, k = torch.randn(32), torch.randn(32)
    reference = _score(q, k, [3], [10])
    for shift in (1, 17, 200):
        assert abs(_score(q, k, [3 + shift], [10 + shift]) - reference) < 1e-3
    assert abs(_score(q, k, [3], [11]) - reference) > 1e-2  # another offset, another score


def test_scores_depend_only_on_relative_position_2d_axial() -> None:
    torch.manual_seed(1)
    q, k = torch.randn(64), torch.randn(64)
    reference = _score(q, k, [2, 1], [9, 4])
    assert abs(_score(q, k, [12, 3], [19, 6]) - reference) < 1e-3
    assert abs(_score(q, k, [2, 1], [9, 5]) - reference) > 1e-2


def test_position_zero_leaves_the_vector_unchanged() -> None:
    x = torch.randn(1, 1, 1, 16)
    angles = rotary_angles(torch.zeros(1, 1, 2), head_dim=16)
    assert torch.equal(apply_rotary(x, angles), x)


def test_encoder_rope_changes_the_output() -> None:
    torch.manual_seed(0)
    plain = models.build_model("audiomae++-debug").eval()
    torch.manual_seed(0)
    rotary = models.build_model("audiomae++-debug", encoder_rope=True, decoder_rope=True).eval()
    mel = torch.randn(1, 200, 80)
    with torch.no_grad():
        assert not torch.allclose(plain.embed(mel), rotary.embed(mel), atol=1e-4)
