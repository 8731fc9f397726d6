"""Forward time of the language-ID head per attention kind as clips get longer.

Self-attention grows as N^2, Performer (r features) and agent attention (N / 2^p agents) as N.
Prints one row per clip length: milliseconds per batch for each kind, and self / kind ratios.

    python benchmarks/lid_attention_speed.py [--frames 250 1000 4000] [--batch 4] [--dim 768]
"""

from __future__ import annotations

import argparse
import time

import torch

from models.heads.lid_head import LanguageIdHead

ATTENTIONS = ("self", "performer", "agent")


def time_forward_ms(head: LanguageIdHead, frames: torch.Tensor, repeats: int) -> float:
    """Median wall time of `repeats` forward passes, after one warm-up pass."""
    with torch.inference_mode():
        head(frames)
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            head(frames)
            times.append(time.perf_counter() - start)
    return 1000 * sorted(times)[len(times) // 2]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--frames", type=int, nargs="+", default=[250, 1000, 4000], help="clip lengths N")
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--dim", type=int, default=768, help="encoder feature width")
    parser.add_argument("--attention-dim", type=int, default=256, help="attention width of the head")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)

    heads = {
        kind: LanguageIdHead(args.dim, 10, attention=kind, attention_dim=args.attention_dim).eval()
        for kind in ATTENTIONS
    }
    print(f"batch {args.batch}, dim {args.dim}, attention dim {args.attention_dim}, {args.threads} threads")
    print(f"{'frames':>7} " + " ".join(f"{kind + ' ms':>13}" for kind in ATTENTIONS) + "  self/performer  self/agent")
    for num_frames in args.frames:
        frames = torch.randn(args.batch, num_frames, args.dim)
        ms = {kind: time_forward_ms(head, frames, args.repeats) for kind, head in heads.items()}
        print(
            f"{num_frames:>7} "
            + " ".join(f"{ms[kind]:>13.1f}" for kind in ATTENTIONS)
            + f"  {ms['self'] / ms['performer']:>14.2f}  {ms['self'] / ms['agent']:>10.2f}"
        )


if __name__ == "__main__":
    main()
