"""mLSTM cell: chunkwise against parallel form, forward + backward on CPU at sequence length 1001.

Inputs are one AxLSTM layer's cell inputs: 4 heads of head_dim = E * d / 4 (default: axlstm-tiny
with E = 3, d = 192 -> 144), random q, k, v and gate pre-activations, forget gates around +3.
Each figure is the median of `--repeats` forward + backward passes after one warm-up, as wall
time and as this process's CPU time. On a shared machine the wall time mostly measures the other
processes; the CPU time (summed over torch's threads) still compares the two forms fairly.
One thread by default: on a busy machine OpenMP's spin-waiting inflated the chunkwise form's
many small operations several-fold with two threads (`--threads 2` to measure that case).

1001 = 7 x 11 x 13 is not a multiple of a power-of-two chunk: `mlstm_chunkwise` zero-pads the
sequence end to the next multiple of `--chunk-size` (64 -> 1024) and cuts the padding off again,
which is exact because the cell is causal. `--chunk-size 143` (= 1001 / 7) needs no padding.

  python benchmarks/bench_mlstm.py
  python benchmarks/bench_mlstm.py --head-dim 576 --chunk-size 256   # axlstm-base cell, E = 3

The chunkwise form costs ~ S * DH * (DH + chunk) against the parallel form's ~ S^2 * DH, so it wins
when the sequence is long next to the head dim: clearly for the tiny and small cells at 1001 steps,
barely for the base cell (DH = 576), and not at the 251 tokens of a 2 s crop.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from models.axlstm.mlstm import mlstm_chunkwise, mlstm_parallel  # noqa: E402

TARGET_SPEEDUP = 3.0  # issue 4: chunkwise >= 3x faster than parallel at length 1001 on CPU


def make_inputs(batch: int, heads: int, seq_len: int, head_dim: int) -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(batch, heads, seq_len, head_dim, generator=generator) for _ in range(3))
    i_preact = torch.randn(batch, heads, seq_len, generator=generator)
    f_preact = 3.0 + torch.randn(batch, heads, seq_len, generator=generator)
    return [q, k, v, i_preact, f_preact]


def time_forward_backward(
    cell: Callable[..., torch.Tensor], inputs: list[torch.Tensor], repeats: int
) -> tuple[float, float]:
    """Median (wall, CPU) seconds of a forward + backward pass, after one warm-up pass."""
    wall, cpu = [], []
    for _ in range(repeats + 1):
        leaves = [t.clone().requires_grad_() for t in inputs]
        wall_start, cpu_start = time.perf_counter(), time.process_time()
        cell(*leaves).sum().backward()
        wall.append(time.perf_counter() - wall_start)
        cpu.append(time.process_time() - cpu_start)
    return statistics.median(wall[1:]), statistics.median(cpu[1:])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seq-len", type=int, default=1001)
    parser.add_argument("--batch", type=int, default=2)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--head-dim", type=int, default=144)
    parser.add_argument("--chunk-size", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1)
    options = parser.parse_args()
    torch.set_num_threads(options.threads)

    inputs = make_inputs(options.batch, options.heads, options.seq_len, options.head_dim)
    padded = -(-options.seq_len // options.chunk_size) * options.chunk_size
    print(
        f"mLSTM cell, CPU, {options.threads} threads: batch {options.batch}, {options.heads} "
        f"heads x head_dim {options.head_dim}, sequence {options.seq_len}, float32, "
        f"forward + backward, median of {options.repeats} after 1 warm-up"
    )
    parallel = time_forward_backward(mlstm_parallel, inputs, options.repeats)
    chunkwise = time_forward_backward(
        lambda *a: mlstm_chunkwise(*a, chunk_size=options.chunk_size), inputs, options.repeats
    )
    print(f"  parallel : wall {parallel[0] * 1e3:8.1f} ms   CPU {parallel[1] * 1e3:8.1f} ms")
    print(
        f"  chunkwise: wall {chunkwise[0] * 1e3:8.1f} ms   CPU {chunkwise[1] * 1e3:8.1f} ms   "
        f"(chunk {options.chunk_size}, sequence padded to {padded})"
    )
    for label, index in (("wall", 0), ("CPU", 1)):
        speedup = parallel[index] / chunkwise[index]
        verdict = "met" if speedup >= TARGET_SPEEDUP else "NOT met"
        target = f" (target >= {TARGET_SPEEDUP:.0f}x at 1001: {verdict})"
        print(f"  speed-up ({label}): {speedup:.2f}x{target if options.seq_len == 1001 else ''}")


if __name__ == "__main__":
    main()
