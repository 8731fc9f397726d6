"""The ViL mLSTM layer and blocks: causality, direction, gate initialisation, both cell forms."""

from __future__ import annotations

import torch

from models.axlstm.mlstm import mlstm
from models.axlstm.vil import MLSTMLayer, ViLBlock, build_vil_stack


def _layer(**overrides: object) -> MLSTMLayer:
    torch.manual_seed(0)
    kwargs = dict(expansion_factor=2, n_heads=4, n_blocks=2)
    kwargs.update(overrides)
    return MLSTMLayer(16, **kwargs)  # type: ignore[arg-type]


def _perturb_at(x: torch.Tensor, t: int) -> torch.Tensor:
    changed = x.clone()
    changed[:, t] += 1.0
    return changed


def test_forward_block_is_causal_and_reversed_block_is_anticausal():
    torch.manual_seed(0)
    x = torch.randn(2, 12, 16)
    t = 6
    for reverse in (False, True):
        block = ViLBlock(16, reverse=reverse, expansion_factor=2, n_heads=4, n_blocks=2)
        with torch.no_grad():
            change = (block(_perturb_at(x, t)) - block(x)).abs().amax(dim=(0, 2))  # (seq,)
        unaffected = change[t + 1 :] if reverse else change[:t]
        affected = change[:t] if reverse else change[t + 1 :]
        assert unaffected.max() == 0.0, f"reverse={reverse}: information leaked the wrong way"
        assert affected.min() > 0.0, f"reverse={reverse}: no information flowed the right way"


def test_stack_alternates_direction_so_every_position_sees_the_whole_sequence():
    stack = build_vil_stack(16, 2, expansion_factor=2, n_heads=4, mlstm_form="parallel", chunk_size=4)
    assert [block.reverse for block in stack] == [False, True]
    torch.manual_seed(1)
    x = torch.randn(1, 10, 16)
    with torch.no_grad():
        base, changed = x, _perturb_at(x, 9)
        for block in stack:
            base, changed = block(base), block(changed)
    assert (changed - base)[:, 0].abs().max() > 0.0  # the first step hears the last one


def test_forget_gate_biases_span_three_to_six_and_gates_start_input_independent():
    layer = _layer(n_heads=4)
    torch.testing.assert_close(layer.forget_gate.bias.detach(), torch.tensor([3.0, 4.0, 5.0, 6.0]))
    assert torch.count_nonzero(layer.forget_gate.weight) == 0
    assert torch.count_nonzero(layer.input_gate.weight) == 0


def test_parallel_and_chunkwise_layers_agree_forward_and_backward():
    torch.manual_seed(2)
    x = torch.randn(2, 23, 16)
    results = []
    for form in ("parallel", "chunkwise"):
        layer = _layer(mlstm_form=form, chunk_size=8)
        inputs = x.clone().requires_grad_()
        out = layer(inputs)
        out.square().sum().backward()
        results.append((out.detach(), inputs.grad, layer.proj_up.weight.grad))
    for parallel, chunkwise in zip(*results):
        torch.testing.assert_close(chunkwise, parallel, atol=1e-4, rtol=1e-4)


def test_layer_parameter_count_follows_the_xlstm_layout():
    # up 16 -> 64 (no bias), conv 32 * 4 + 32, q/k/v 3 * 32 * 4, gates 2 * (96 * 4 + 4),
    # group-norm weight 32, skip 32, down 32 -> 16 (no bias)
    expected = 16 * 64 + 32 * 5 + 3 * 32 * 4 + 2 * (96 * 4 + 4) + 32 + 32 + 32 * 16
    layer = _layer()
    assert sum(p.numel() for p in layer.parameters()) == expected


def test_cell_runs_in_float32_under_bfloat16_autocast():
    layer = _layer()
    generator = torch.Generator().manual_seed(3)
    q, k, v = (torch.randn(2, 4, 9, 8, generator=generator).bfloat16() for _ in range(3))
    i_preact, f_preact = (torch.randn(2, 4, 9, generator=generator).bfloat16() for _ in range(2))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        h = layer._cell(q, k, v, i_preact, f_preact)
    expected = mlstm(*(t.float() for t in (q, k, v, i_preact, f_preact)))
    assert h.dtype == torch.float32
    torch.testing.assert_close(h, expected)
