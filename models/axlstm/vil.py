"""ViL (Vision-LSTM) blocks: an mLSTM layer in a pre-norm residual block, alternating direction.

Layer (the layout of the xLSTM/ViL authors' code that AxLSTM builds on; parameter counts in
models.md are reproduced only with exactly these pieces):
    x (B, S, d) -> up-projection to 2 * E * d, split into (x_m, z)
    x_m -> causal depthwise conv (kernel 4) -> SiLU = c;  q, k from c;  v from x_m (before the conv)
    q, k, v: block-diagonal projections with 4 x 4 blocks
    input/forget gate pre-activations: Linear([q, k, v] -> 4 heads)
    h = mLSTM(q, k, v) per head -> group norm per head -> + learnable_skip * c
    output gate: h * SiLU(z) -> down-projection to d
The xLSTM paper writes the output gate as o_t = sigmoid(W_o x_t); in this layer it is the SiLU of
the z branch (z * sigmoid(z)), with no separate o-gate weights. Projections carry no bias and the
norms no bias, as in the authors' code.

Block: x + layer(LN(x)). Every second block reverses the sequence before its layer and back after,
so a stack reads the sequence in both directions.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from models.axlstm.mlstm import DEFAULT_CHUNK_SIZE, MLSTMForm, mlstm

GROUP_NORM_EPS = 1e-5
QKV_BLOCK_SIZE = 4  # q, k, v projections are block-diagonal with 4 x 4 blocks (authors' default)
CONV_KERNEL_SIZE = 4


class LayerNormWithoutBias(nn.Module):
    """LayerNorm with a weight and no bias (the xLSTM code's norms)."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.layer_norm(x, self.weight.shape, self.weight, None, GROUP_NORM_EPS)


class BlockDiagonalLinear(nn.Module):
    """y = x W, W block-diagonal: dim / block_size blocks of block_size x block_size; no bias."""

    def __init__(self, dim: int, block_size: int) -> None:
        super().__init__()
        if dim % block_size:
            raise ValueError(f"inner dim {dim} is not a multiple of the qkv block size {block_size}")
        self.block_size = block_size
        # Small init as in the xLSTM code: std = sqrt(2 / (5 * fan_in)) with fan_in = block_size.
        std = math.sqrt(2.0 / (5.0 * block_size))
        self.weight = nn.Parameter(torch.randn(dim // block_size, block_size, block_size) * std)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x (..., dim) -> (..., dim)."""
        blocks = x.unflatten(-1, (-1, self.block_size))  # (..., n_blocks, block_size)
        return torch.einsum("...hi,hio->...ho", blocks, self.weight).flatten(-2)


class CausalDepthwiseConv1d(nn.Module):
    """Per-channel convolution over time that sees only the current and earlier steps."""

    def __init__(self, dim: int, kernel_size: int) -> None:
        super().__init__()
        self.kernel_size = kernel_size
        self.conv = nn.Conv1d(dim, dim, kernel_size, groups=dim, bias=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x (B, S, dim) -> (B, S, dim)."""
        x = F.pad(x.transpose(1, 2), (self.kernel_size - 1, 0))  # left padding only: causal
        return self.conv(x).transpose(1, 2)


class MLSTMLayer(nn.Module):
    """The ViL mLSTM layer (module docstring). Input and output (B, S, dim)."""

    def __init__(
        self,
        dim: int,
        *,
        expansion_factor: int,
        n_heads: int,
        n_blocks: int,
        forget_bias_range: tuple[float, float] = (3.0, 6.0),
        mlstm_form: MLSTMForm = "parallel",
        chunk_size: int = DEFAULT_CHUNK_SIZE,
    ) -> None:
        super().__init__()
        inner = expansion_factor * dim
        if inner % n_heads:
            raise ValueError(f"inner dim {inner} (= {expansion_factor} x {dim}) is not a multiple of n_heads={n_heads}")
        self.inner_dim, self.n_heads = inner, n_heads
        self.mlstm_form, self.chunk_size = mlstm_form, chunk_size
        self.proj_up = nn.Linear(dim, 2 * inner, bias=False)
        self.conv = CausalDepthwiseConv1d(inner, CONV_KERNEL_SIZE)
        self.q_proj = BlockDiagonalLinear(inner, QKV_BLOCK_SIZE)
        self.k_proj = BlockDiagonalLinear(inner, QKV_BLOCK_SIZE)
        self.v_proj = BlockDiagonalLinear(inner, QKV_BLOCK_SIZE)
        self.input_gate = nn.Linear(3 * inner, n_heads)
        self.forget_gate = nn.Linear(3 * inner, n_heads)
        self.norm_weight = nn.Parameter(torch.ones(inner))  # per-head group norm, no bias
        self.learnable_skip = nn.Parameter(torch.ones(inner))
        self.proj_down = nn.Linear(inner, dim, bias=False)
        self._init_weights(dim, n_blocks, forget_bias_range)

    def _init_weights(self, dim: int, n_blocks: int, forget_bias_range: tuple[float, float]) -> None:
        # xLSTM's scheme: "small init" for inputs, Wang init (depth-scaled) for the residual branch.
        nn.init.normal_(self.proj_up.weight, std=math.sqrt(2.0 / (5.0 * dim)))
        nn.init.normal_(self.proj_down.weight, std=2.0 / n_blocks / math.sqrt(dim))
        # Gates start input-independent; forget biases spread over heads so that some heads keep
        # a long memory (sigmoid(6) = 0.998) and others a shorter one (sigmoid(3) = 0.95).
        nn.init.zeros_(self.forget_gate.weight)
        with torch.no_grad():
            self.forget_gate.bias.copy_(torch.linspace(*forget_bias_range, self.n_heads))
        nn.init.zeros_(self.input_gate.weight)
        nn.init.normal_(self.input_gate.bias, std=0.1)

    def _cell(
        self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, i_preact: torch.Tensor, f_preact: torch.Tensor
    ) -> torch.Tensor:
        """The mLSTM in float32 even under bf16 autocast: the forget-gate cumsums and the
        exp-stabilization lose too much in 8 mantissa bits (the reference kernels cast too)."""
        device_type = q.device.type
        if device_type in ("cpu", "cuda") and torch.is_autocast_enabled(device_type):
            with torch.autocast(device_type, enabled=False):
                inputs = [t.float() for t in (q, k, v, i_preact, f_preact)]
                return mlstm(*inputs, form=self.mlstm_form, chunk_size=self.chunk_size)
        return mlstm(q, k, v, i_preact, f_preact, form=self.mlstm_form, chunk_size=self.chunk_size)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, seq_len, _ = x.shape
        x_m, z = self.proj_up(x).chunk(2, dim=-1)  # (B, S, inner) each
        conv_act = F.silu(self.conv(x_m))  # (B, S, inner)
        q, k, v = self.q_proj(conv_act), self.k_proj(conv_act), self.v_proj(x_m)
        gate_input = torch.cat([q, k, v], dim=-1)  # (B, S, 3 * inner)
        i_preact = self.input_gate(gate_input).transpose(1, 2)  # (B, NH, S)
        f_preact = self.forget_gate(gate_input).transpose(1, 2)  # (B, NH, S)

        def to_heads(t: torch.Tensor) -> torch.Tensor:  # (B, S, inner) -> (B, NH, S, DH)
            return t.view(batch, seq_len, self.n_heads, -1).transpose(1, 2)

        h = self._cell(to_heads(q), to_heads(k), to_heads(v), i_preact, f_preact)  # (B, NH, S, DH)
        h = h.transpose(1, 2).reshape(batch * seq_len, self.inner_dim)
        h = F.group_norm(h, self.n_heads, self.norm_weight, None, GROUP_NORM_EPS)
        h = h.view(batch, seq_len, self.inner_dim) + self.learnable_skip * conv_act
        return self.proj_down(h * F.silu(z))  # (B, S, dim)


class ViLBlock(nn.Module):
    """x + layer(LN(x)); with `reverse=True` the layer reads the sequence back to front."""

    def __init__(self, dim: int, *, reverse: bool, **layer_kwargs: object) -> None:
        super().__init__()
        self.reverse = reverse
        self.norm = LayerNormWithoutBias(dim)
        self.layer = MLSTMLayer(dim, **layer_kwargs)  # type: ignore[arg-type]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x (B, S, dim) -> (B, S, dim)."""
        if not self.reverse:
            return x + self.layer(self.norm(x))
        flipped = x.flip(1)
        return x + self.layer(self.norm(flipped)).flip(1)


def build_vil_stack(
    dim: int, depth: int, *, expansion_factor: int, n_heads: int, mlstm_form: MLSTMForm, chunk_size: int
) -> nn.ModuleList:
    """`depth` blocks, every second one (1, 3, ...) reversed."""
    return nn.ModuleList(
        ViLBlock(
            dim,
            reverse=index % 2 == 1,
            expansion_factor=expansion_factor,
            n_heads=n_heads,
            n_blocks=depth,
            mlstm_form=mlstm_form,
            chunk_size=chunk_size,
        )
        for index in range(depth)
    )
