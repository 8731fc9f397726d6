"""Whether the CPU kernels torch picks for this machine change a seeded training run's numbers.

torch chooses its vectorised CPU kernels at run time by instruction set (`DEFAULT`, `AVX2`,
`AVX512`; `ATEN_CPU_CAPABILITY` forces a lower one). A different kernel sums in a different order,
so the last bits of a loss differ, and many optimizer steps carry that difference into the weights.
This runs one seeded training (a 2-layer transformer encoder with a linear head, AdamW, one
thread, fixed data) twice under each kernel set this machine offers and prints the loss at a few
steps and a hash of the final weights:
- the same kernel set twice gives the same hash (the run is deterministic on one machine kind);
- another kernel set gives other numbers from the first step on.
So a study's numbers repeat to the digit on one machine kind and move on another; docs/results.md
quotes this for the positive control, whose 4,000 steps amplify the difference most.

    python benchmarks/kernel_dispatch.py --steps 1000
"""

from __future__ import annotations

import argparse
import hashlib
import os
import subprocess
import sys

import torch

LOGGED_STEPS = (1, 10, 100, 500, 1000, 2000, 4000)


def train(steps: int) -> None:
    """The seeded run itself (in a child process, under the capability its environment forces)."""
    torch.set_num_threads(1)
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(128, 4, dim_feedforward=256, dropout=0.0, batch_first=True)
    encoder = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.TransformerEncoder(layer, 2))
    head = torch.nn.Linear(128, 10)
    weights = [*encoder.parameters(), *head.parameters()]
    optimizer = torch.optim.AdamW(weights, lr=1e-3, weight_decay=0.01)
    draws = torch.Generator().manual_seed(1)
    inputs, labels = torch.randn(512, 50, 64, generator=draws), torch.randint(0, 10, (512,), generator=draws)
    for step in range(1, steps + 1):
        batch = torch.randint(0, 512, (32,), generator=draws)
        loss = torch.nn.functional.cross_entropy(head(encoder(inputs[batch]).mean(1)), labels[batch])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if step in LOGGED_STEPS:
            print(f"step {step}: loss {loss.item():.10f}", flush=True)
    digest = hashlib.sha256(b"".join(w.detach().numpy().tobytes() for w in weights)).hexdigest()[:16]
    print(f"weights {digest} ({torch.backends.cpu.get_cpu_capability()} kernels)", flush=True)


def capabilities_here() -> list[str]:
    """The kernel sets this machine can run, lowest first (a forced set above the CPU's is ignored)."""
    best = torch.backends.cpu.get_cpu_capability()
    ladder = ["DEFAULT", "AVX2", "AVX512"]
    return ladder[: ladder.index(best) + 1] if best in ladder else [best]


def run_under(capability: str, steps: int) -> list[str]:
    env = {**os.environ, "ATEN_CPU_CAPABILITY": capability.lower(), "OMP_NUM_THREADS": "1"}
    done = subprocess.run([sys.executable, __file__, "--child", "--steps", str(steps)], env=env,
                          capture_output=True, text=True, check=True)  # fmt: skip
    return done.stdout.strip().splitlines()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=1000, help="optimizer steps per run")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        train(args.steps)
        return
    print(f"[kernel-dispatch] this CPU's best kernel set: {torch.backends.cpu.get_cpu_capability()}; "
          f"torch {torch.__version__}; {args.steps} steps, one thread, each set run twice", flush=True)  # fmt: skip
    hashes: dict[str, set[str]] = {}
    for capability in capabilities_here():
        for attempt in (1, 2):
            lines = run_under(capability, args.steps)
            print(f"{capability:>8} run {attempt}: " + "; ".join(lines), flush=True)
            hashes.setdefault(capability, set()).add(lines[-1].split()[1])
    repeats = all(len(found) == 1 for found in hashes.values())
    distinct = len({next(iter(found)) for found in hashes.values()}) == len(hashes)
    print(f"[kernel-dispatch] same kernel set twice: {'same weights' if repeats else 'OTHER weights'}; "
          f"across kernel sets: {'other weights' if distinct else 'some sets gave the same weights'}")  # fmt: skip


if __name__ == "__main__":
    main()
