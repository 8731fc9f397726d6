"""Conformer pieces: the relative table, rel-pos scores against a direct sum, rotary-before-
projection attention, the depthwise conv's reach, parameter counts per block."""

from __future__ import annotations

import math

import pytest
import torch

from models.layers.rope import apply_rotary, rotary_angles
from models.wave.conformer_attention import ConformerSelfAttention, relative_position_table
from models.wave.conformer_block import ConformerBlock, ConformerConvModule


def test_relative_table_rows_run_from_t_minus_1_down_to_minus_t_plus_1() -> None:
    table = relative_position_table(4, 6)
    assert table.shape == (7, 6)
    # row 3 is r = 0: sin 0 = 0 on even features, cos 0 = 1 on odd
    torch.testing.assert_close(table[3], torch.tensor([0.0, 1.0, 0.0, 1.0, 0.0, 1.0]))
    # row 0 is r = +3; its first pair is (sin 3, cos 3); row 6 is r = -3
    torch.testing.assert_close(table[0, :2], torch.tensor([math.sin(3.0), math.cos(3.0)]))
    torch.testing.assert_close(table[6, :2], torch.tensor([math.sin(-3.0), math.cos(-3.0)]))


def _attention(position: str) -> ConformerSelfAttention:
    torch.manual_seed(0)
    return ConformerSelfAttention(8, 2, position=position).eval()


def test_rel_pos_attention_equals_the_transformer_xl_sum() -> None:
    attention = _attention("rel_pos")
    x = torch.randn(1, 5, 8)
    n, heads, head_dim = 5, 2, 4
    q = attention.q(x).view(n, heads, head_dim)
    k = attention.k(x).view(n, heads, head_dim)
    v = attention.v(x).view(n, heads, head_dim)
    table = relative_position_table(n, 8)
    out = torch.zeros(n, heads, head_dim)
    for h in range(heads):
        scores = torch.zeros(n, n)
        for i in range(n):
            for j in range(n):
                position = attention.linear_pos(table[(n - 1) - (i - j)]).view(heads, head_dim)[h]
                scores[i, j] = (
                    (q[i, h] + attention.pos_bias_u[h]) @ k[j, h] + (q[i, h] + attention.pos_bias_v[h]) @ position
                ) / math.sqrt(head_dim)
        out[:, h] = scores.softmax(-1) @ v[:, h]
    expected = attention.out(out.reshape(1, n, 8))
    torch.testing.assert_close(attention(x), expected, atol=1e-5, rtol=1e-5)


def test_rope_attention_rotates_the_input_before_the_q_k_projections() -> None:
    attention = _attention("rope")
    x = torch.randn(1, 6, 8)
    heads = x.view(1, 6, 2, 4).transpose(1, 2)
    rotated = apply_rotary(heads, rotary_angles(torch.arange(6)[None, :, None], 4))
    rotated = rotated.transpose(1, 2).reshape(1, 6, 8)
    q = attention.q(rotated).view(6, 2, 4).transpose(0, 1)
    k = attention.k(rotated).view(6, 2, 4).transpose(0, 1)
    v = attention.v(x).view(6, 2, 4).transpose(0, 1)
    weights = (q @ k.transpose(-1, -2) / 2.0).softmax(-1)  # sqrt(head_dim 4) = 2
    expected = attention.out((weights @ v).transpose(0, 1).reshape(1, 6, 8))
    torch.testing.assert_close(attention(x), expected, atol=1e-5, rtol=1e-5)


def test_depthwise_conv_reaches_15_frames_each_way() -> None:
    torch.manual_seed(0)
    conv = ConformerConvModule(8, 31, dropout=0.0).eval()  # eval: BatchNorm uses running stats
    x = torch.randn(1, 80, 8)
    changed = x.clone()
    changed[0, 40, 0] += 1.0  # one channel: a shift of every channel would vanish in the LayerNorm
    delta = (conv(changed) - conv(x)).abs().amax(-1)[0]
    reached = torch.nonzero(delta > 1e-6).flatten()
    assert (reached.min().item(), reached.max().item()) == (25, 55)
    assert conv(x).shape == (1, 80, 8)


def test_even_depthwise_kernel_is_rejected() -> None:
    with pytest.raises(ValueError, match="must be odd"):
        ConformerConvModule(8, 30, dropout=0.0)


@pytest.mark.parametrize("position,expected", [("rel_pos", 25_226_240), ("rope", 24_175_616)])
def test_block_parameters_at_width_1024(position: str, expected: int) -> None:
    with torch.device("meta"):
        block = ConformerBlock(1024, 16, 4096, position=position)
    ffn = 2 * 1024 + 1024 * 4096 + 4096 + 4096 * 1024 + 1024  # LayerNorm + two Linear: 8,395,776
    attention = 2 * 1024 + 4 * (1024 * 1024 + 1024)  # LayerNorm + q, k, v, out
    # pointwise 1024 -> 2048 and 1024 -> 1024, depthwise 1024 x 31, no conv bias; LN and BatchNorm
    conv = 2 * 1024 + 1024 * 2048 + 1024 * 31 + 2 * 1024 + 1024 * 1024
    rel_pos = 1024 * 1024 + 2 * 16 * 64  # linear_pos (no bias) + pos_bias_u, pos_bias_v
    total = 2 * ffn + attention + conv + 2 * 1024 + (rel_pos if position == "rel_pos" else 0)
    assert total == expected
    assert sum(p.numel() for p in block.parameters()) == expected
