"""The mLSTM cell's two forms against the `mlstm-kernels` native kernels (test-only oracle)."""

from __future__ import annotations

import pytest
import torch

from models.axlstm.mlstm import mlstm, mlstm_chunkwise, mlstm_parallel

kernels_parallel = pytest.importorskip("mlstm_kernels.torch.parallel.native")
kernels_chunkwise = pytest.importorskip("mlstm_kernels.torch.chunkwise.native")

TOLERANCE = 1e-4  # float32, forward and backward (issue 4)


def _random_inputs(
    seq_len: int, *, seed: int, gate_scale: float = 1.0, batch: int = 2, heads: int = 3, head_dim: int = 16
) -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(batch, heads, seq_len, head_dim, generator=generator) for _ in range(3))
    # Unit-variance q and k give gradients of O(100) here, whose float32 rounding alone is ~1e-4;
    # halving them keeps the comparison about the algorithm, not about rounding.
    q, k = 0.5 * q, 0.5 * k
    i_preact = gate_scale * torch.randn(batch, heads, seq_len, generator=generator)
    # Forget pre-activations around +3: the regime the layer's bias init (linspace(3, 6)) starts in.
    f_preact = 3.0 + gate_scale * torch.randn(batch, heads, seq_len, generator=generator)
    return [q, k, v, i_preact, f_preact]


def _output_and_grads(fn, inputs: list[torch.Tensor], upstream_seed: int = 7):
    leaves = [t.detach().clone().requires_grad_() for t in inputs]
    h = fn(*leaves)
    upstream = torch.randn(h.shape, generator=torch.Generator().manual_seed(upstream_seed))
    (h * upstream).sum().backward()
    return h.detach(), [leaf.grad for leaf in leaves]


def _assert_close(mine, reference) -> None:
    (h_mine, grads_mine), (h_ref, grads_ref) = mine, reference
    assert h_mine.shape == h_ref.shape
    torch.testing.assert_close(h_mine, h_ref, atol=TOLERANCE, rtol=0)
    for name, g_mine, g_ref in zip("qkvif", grads_mine, grads_ref):
        torch.testing.assert_close(g_mine, g_ref, atol=TOLERANCE, rtol=0, msg=f"grad {name}")


def test_parallel_form_matches_reference_kernel_forward_and_backward():
    inputs = _random_inputs(48, seed=0)
    mine = _output_and_grads(mlstm_parallel, inputs)
    reference = _output_and_grads(kernels_parallel.mlstm_parallel__native_autograd, inputs)
    _assert_close(mine, reference)


def test_chunkwise_form_matches_reference_kernel_forward_and_backward():
    inputs = _random_inputs(64, seed=1)
    mine = _output_and_grads(lambda *a: mlstm_chunkwise(*a, chunk_size=16), inputs)
    reference = _output_and_grads(
        lambda *a: kernels_chunkwise.mlstm_chunkwise__native_autograd(*a, chunk_size=16), inputs
    )
    _assert_close(mine, reference)


def test_chunkwise_form_matches_parallel_kernel_on_length_not_divisible_by_chunk():
    # 1001 = 7 * 11 * 13 is the benchmark's length; 53 is prime: both need padding at chunk 16.
    inputs = _random_inputs(53, seed=2)
    mine = _output_and_grads(lambda *a: mlstm_chunkwise(*a, chunk_size=16), inputs)
    reference = _output_and_grads(kernels_parallel.mlstm_parallel__native_autograd, inputs)
    _assert_close(mine, reference)


def test_large_gate_preactivations_stay_finite():
    # exp(100) overflows float32 (max ~3.4e38 = exp(88.7)); the stabilizer must absorb it.
    inputs = _random_inputs(40, seed=3, gate_scale=100.0)
    for fn in (mlstm_parallel, lambda *a: mlstm_chunkwise(*a, chunk_size=8)):
        h, grads = _output_and_grads(fn, inputs)
        assert torch.isfinite(h).all()
        assert all(torch.isfinite(g).all() for g in grads)
    parallel, _ = _output_and_grads(mlstm_parallel, inputs)
    chunkwise, _ = _output_and_grads(lambda *a: mlstm_chunkwise(*a, chunk_size=8), inputs)
    # Outputs reach |h| ~ 10 here (a single huge write dominates), so compare relatively.
    torch.testing.assert_close(chunkwise, parallel, atol=TOLERANCE, rtol=TOLERANCE)


def test_first_two_steps_follow_the_recurrence():
    # Step by step: C_t = f_t C_{t-1} + i_t v_t k_t^T, n_t = f_t n_{t-1} + i_t k_t,
    # h_t = C_t q_t / max(|n_t^T q_t|, 1), with q scaled by 1/sqrt(head_dim).
    q, k, v, i_preact, f_preact = _random_inputs(2, seed=4)
    q_scaled = q / q.shape[-1] ** 0.5
    input_gate, forget_gate = torch.exp(i_preact), torch.sigmoid(f_preact)
    memory = torch.zeros(*q.shape[:2], q.shape[-1], q.shape[-1])
    normalizer = torch.zeros(q.shape[:2] + q.shape[-1:])
    for form in ("parallel", "chunkwise"):
        h = mlstm(q, k, v, i_preact, f_preact, form=form, chunk_size=1)
        memory.zero_(), normalizer.zero_()
        for t in range(2):
            memory = forget_gate[:, :, t, None, None] * memory + input_gate[:, :, t, None, None] * (
                v[:, :, t, :, None] * k[:, :, t, None, :]
            )
            normalizer = forget_gate[:, :, t, None] * normalizer + input_gate[:, :, t, None] * k[:, :, t]
            denominator = (normalizer * q_scaled[:, :, t]).sum(-1, keepdim=True)
            denominator = denominator.abs().clamp(min=1.0)
            expected = (memory @ q_scaled[:, :, t, :, None]).squeeze(-1) / denominator
            torch.testing.assert_close(h[:, :, t], expected, atol=1e-5, rtol=1e-5)


def test_form_dispatch_rejects_unknown_form():
    inputs = _random_inputs(8, seed=5)
    with pytest.raises(ValueError, match="form"):
        mlstm(*inputs, form="recurrent")


def test_gate_shape_mismatch_is_reported():
    q, k, v, i_preact, f_preact = _random_inputs(8, seed=6)
    with pytest.raises(ValueError, match="gate pre-activations"):
        mlstm_parallel(q, k, v, i_preact[..., :-1], f_preact)
