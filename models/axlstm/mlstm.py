"""The mLSTM cell (xLSTM's matrix-memory LSTM), computed over whole sequences.

Recurrence per head (Beck et al., 2024):
    C_t = f_t C_{t-1} + i_t v_t k_t^T        (matrix memory)
    n_t = f_t n_{t-1} + i_t k_t              (normalizer)
    h_t = C_t q_t / max(|n_t^T q_t|, 1)
with an exponential input gate i_t = exp(i~_t), a sigmoid forget gate f_t = sigmoid(f~_t) and
q_t scaled by 1/sqrt(head_dim). The output gate is applied by the caller (models/axlstm/vil.py).

Conventions (identical to `mlstm_kernels` 2.0.6 so that its native kernels serve as an oracle):
- inputs are gate *pre-activations* i~, f~ shaped (batch, heads, seq); q, k, v are
  (batch, heads, seq, head_dim); the result is h (batch, heads, seq, head_dim).
- exp(i~) overflows for pre-activations above ~88 in float32, so every form carries a running
  log-scale m and works with exp(log-weight - m) <= 1. Multiplying numerator and denominator by
  exp(-m) turns `max(|n^T q|, 1)` into `max(|n'^T q|, exp(-m))`, so the result does not depend on
  which m is chosen (up to `eps`, which is added to the stabilized denominator).
- Unlike the reference kernels, m is floored at 0: with strongly negative input gates the
  largest log-weight m falls below -88, exp(-m) becomes inf and the backward pass turns NaN.
  m >= max(log-weight) is all the stabilizer needs; the floor changes results only via eps.

Two forms compute the same function:
- `mlstm_parallel`: the (seq x seq) decay matrix at once. Memory and time grow with seq^2.
- `mlstm_chunkwise`: the sequence is cut into chunks of `chunk_size`; inside a chunk the
  parallel form, across chunks the memory state (C, n) carried at chunk boundaries. Time grows
  with seq * head_dim * (chunk_size + head_dim) instead of seq^2 * head_dim, so it wins when the
  sequence is long next to head_dim (benchmarks/bench_mlstm.py).
"""

from __future__ import annotations

from typing import Literal

import torch
import torch.nn.functional as F

MLSTMForm = Literal["parallel", "chunkwise"]
DEFAULT_EPS = 1e-6
DEFAULT_CHUNK_SIZE = 64


def _check_shapes(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, i_preact: torch.Tensor, f_preact: torch.Tensor
) -> None:
    if q.dim() != 4 or k.shape != q.shape or v.shape[:3] != q.shape[:3]:
        raise ValueError(
            f"q, k, v must be (batch, heads, seq, head_dim) with equal leading dims; got "
            f"q {tuple(q.shape)}, k {tuple(k.shape)}, v {tuple(v.shape)}"
        )
    if i_preact.shape != q.shape[:3] or f_preact.shape != q.shape[:3]:
        raise ValueError(
            f"gate pre-activations must be (batch, heads, seq) = {tuple(q.shape[:3])}; got "
            f"i {tuple(i_preact.shape)}, f {tuple(f_preact.shape)}"
        )


def _causal_log_decay(log_forget_cumsum: torch.Tensor, i_preact: torch.Tensor) -> torch.Tensor:
    """log D[t, s] = sum_{s<r<=t} log f_r + i~_s for s <= t, -inf above the diagonal.

    log_forget_cumsum, i_preact: (..., L) -> (..., L, L).
    """
    length = i_preact.shape[-1]
    causal = torch.ones(length, length, dtype=torch.bool, device=i_preact.device).tril()
    decay = log_forget_cumsum[..., :, None] - log_forget_cumsum[..., None, :]
    decay = torch.where(causal, decay, float("-inf"))
    return decay + i_preact[..., None, :]


def mlstm_parallel(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    i_preact: torch.Tensor,
    f_preact: torch.Tensor,
    *,
    eps: float = DEFAULT_EPS,
) -> torch.Tensor:
    """Stabilized parallel form. q, k, v: (B, NH, S, DH); gates: (B, NH, S) -> h (B, NH, S, DH)."""
    _check_shapes(q, k, v, i_preact, f_preact)
    q = q * q.shape[-1] ** -0.5  # cheaper on (S, DH) than on the (S, S) scores
    log_forget_cumsum = F.logsigmoid(f_preact).cumsum(-1)  # (B, NH, S)
    log_decay = _causal_log_decay(log_forget_cumsum, i_preact)  # (B, NH, S, S)
    # Row-wise max: the largest weight in each row becomes at most exp(0) = 1.
    log_scale = log_decay.max(dim=-1, keepdim=True).values.clamp(min=0.0)  # (B, NH, S, 1)
    scores = (q @ k.transpose(-2, -1)) * torch.exp(log_decay - log_scale)  # (B, NH, S, S)
    normalizer = torch.maximum(scores.sum(-1, keepdim=True).abs(), torch.exp(-log_scale))
    return (scores @ v) * (1.0 / (normalizer + eps))  # (B, NH, S, DH)


def _chunk_boundary_states(
    k: torch.Tensor, v_ext: torch.Tensor, i_preact: torch.Tensor, log_forget_cumsum: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Memory [C | n] and its log-scale m at the start of every chunk, all chunks at once.

    k: (B, NH, NC, L, DH); v_ext: (B, NH, NC, L, DH + 1), v with a ones column, so that the last
    column of k^T v_ext accumulates the normalizer n alongside C. i_preact, log_forget_cumsum:
    (B, NH, NC, L), the cumsum restarting in every chunk. Returns [C | n] (B, NH, NC, DH, DH + 1)
    divided by exp(m), and m (B, NH, NC). The state starts at zero with m = 0.
    """
    chunk_log_forget = log_forget_cumsum[..., -1]  # (B, NH, NC): decay across a whole chunk
    # Log-weight of step t's write as seen at the end of its own chunk.
    log_write = chunk_log_forget[..., None] - log_forget_cumsum + i_preact  # (B, NH, NC, L)
    log_write_max = log_write.max(-1).values  # (B, NH, NC)
    k_weighted = k * torch.exp(log_write - log_write_max[..., None])[..., None]
    # One chunk's writes: (B, NH, NC, DH, DH + 1)
    chunk_state = k_weighted.transpose(-2, -1) @ v_ext

    # The recurrence across chunks is linear, so unroll it: the state entering chunk c is the sum
    # over earlier chunks j of their writes, decayed by the forget gates of chunks j+1 .. c-1.
    num_chunks = chunk_log_forget.shape[-1]
    decay_before = chunk_log_forget.cumsum(-1) - chunk_log_forget  # (B, NH, NC): chunks < c
    log_mix = (
        decay_before[..., :, None]
        - decay_before[..., None, :]
        - chunk_log_forget[..., None, :]
        + log_write_max[..., None, :]
    )  # (B, NH, NC, NC)
    earlier = torch.ones(num_chunks, num_chunks, dtype=torch.bool, device=k.device).tril(-1)
    log_mix = torch.where(earlier, log_mix, float("-inf"))
    # The zero initial state has log-scale 0; decayed to chunk c it contributes decay_before[c].
    log_scale = torch.maximum(log_mix.max(-1).values, decay_before)  # (B, NH, NC)
    mix = torch.exp(log_mix - log_scale[..., None])  # (B, NH, NC, NC)
    state = (mix @ chunk_state.flatten(-2)).view_as(chunk_state)  # (B, NH, NC, DH, DH + 1)
    return state, log_scale


def mlstm_chunkwise(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    i_preact: torch.Tensor,
    f_preact: torch.Tensor,
    *,
    chunk_size: int = DEFAULT_CHUNK_SIZE,
    eps: float = DEFAULT_EPS,
) -> torch.Tensor:
    """Chunkwise form. q, k, v: (B, NH, S, DH); gates: (B, NH, S) -> h (B, NH, S, DH).

    Any S works: the sequence end is zero-padded to a multiple of `chunk_size` and the padding
    cut off again. The cell is causal, so steps after the last real one cannot change it.
    """
    _check_shapes(q, k, v, i_preact, f_preact)
    if chunk_size < 1:
        raise ValueError(f"chunk_size must be a positive integer, got {chunk_size}")
    batch, heads, seq_len, head_dim = q.shape
    chunk_size = min(chunk_size, seq_len)
    pad = -seq_len % chunk_size
    num_chunks = (seq_len + pad) // chunk_size
    q = q * head_dim**-0.5
    # A ones column makes the normalizer n one more value channel (in padded rows too, where
    # k = 0 writes nothing). Padding goes at the end, after every real step: causality keeps
    # it out of the real outputs whatever its values.
    v_ext = F.pad(v, (0, 1, 0, pad), value=1.0)  # (B, NH, S + pad, DH + 1)
    if pad:
        q, k = F.pad(q, (0, 0, 0, pad)), F.pad(k, (0, 0, 0, pad))
        i_preact, f_preact = F.pad(i_preact, (0, pad)), F.pad(f_preact, (0, pad))

    def to_chunks(t: torch.Tensor) -> torch.Tensor:  # (B, NH, S, ...) -> (B, NH, NC, L, ...)
        return t.reshape(batch, heads, num_chunks, chunk_size, *t.shape[3:])

    q, k, v_ext, i_preact = to_chunks(q), to_chunks(k), to_chunks(v_ext), to_chunks(i_preact)
    log_forget_cumsum = F.logsigmoid(to_chunks(f_preact)).cumsum(-1)  # (B, NH, NC, L)
    state, state_log_scale = _chunk_boundary_states(k, v_ext, i_preact, log_forget_cumsum)

    # Inside each chunk: the parallel form, plus the carried state read by q.
    log_decay = _causal_log_decay(log_forget_cumsum, i_preact)  # (B, NH, NC, L, L)
    log_scale_inter = log_forget_cumsum + state_log_scale[..., None]  # (B, NH, NC, L)
    log_scale = torch.maximum(log_scale_inter, log_decay.max(-1).values)
    log_scale = log_scale.clamp(min=0.0)[..., None]  # (B, NH, NC, L, 1)
    scores = (q @ k.transpose(-2, -1)) * torch.exp(log_decay - log_scale)  # (B, NH, NC, L, L)
    q_inter = q * torch.exp(log_scale_inter[..., None] - log_scale)  # (B, NH, NC, L, DH)
    out = q_inter @ state + scores @ v_ext  # (B, NH, NC, L, DH + 1)
    numerator, denominator = out[..., :-1], out[..., -1:]
    normalizer = torch.maximum(denominator.abs(), torch.exp(-log_scale))  # (B, NH, NC, L, 1)
    h = numerator * (1.0 / (normalizer + eps))  # (B, NH, NC, L, DH)
    return h.reshape(batch, heads, num_chunks * chunk_size, head_dim)[:, :, :seq_len]


def mlstm(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    i_preact: torch.Tensor,
    f_preact: torch.Tensor,
    *,
    form: MLSTMForm = "parallel",
    chunk_size: int = DEFAULT_CHUNK_SIZE,
    eps: float = DEFAULT_EPS,
) -> torch.Tensor:
    """Dispatch to the parallel or chunkwise form (same result, different cost)."""
    if form == "parallel":
        return mlstm_parallel(q, k, v, i_preact, f_preact, eps=eps)
    if form == "chunkwise":
        return mlstm_chunkwise(q, k, v, i_preact, f_preact, chunk_size=chunk_size, eps=eps)
    raise ValueError(f"mLSTM form must be 'parallel' or 'chunkwise', got {form!r}")
