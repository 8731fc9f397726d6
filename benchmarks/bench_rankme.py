"""RankMe speed: Gram route vs a direct SVD on the study's 25,600 x 768 matrix.

Run: `python benchmarks/bench_rankme.py [--repeats 5] [--threads 2]`. Prints the median seconds of
each route, the speed-up and the relative difference of the values; exits non-zero when the Gram
route misses its targets (<= 1 s, >= 5x faster, equal to 1e-6 relative).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time


def _median_seconds(function, repeats: int) -> tuple[float, float]:
    timings, value = [], 0.0
    for _ in range(repeats):
        start = time.perf_counter()
        value = function()
        timings.append(time.perf_counter() - start)
    return statistics.median(timings), value


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2, help="BLAS threads (set before numpy loads)")
    parser.add_argument("--n-samples", type=int, default=25_600)
    parser.add_argument("--n-features", type=int, default=768)
    args = parser.parse_args()
    for variable in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[variable] = str(args.threads)

    import numpy as np

    from pipeline.rankme.effective_rank import rankme, rankme_from_singular_values

    embeddings = np.random.default_rng(0).standard_normal((args.n_samples, args.n_features)).astype(np.float32)

    def direct_svd() -> float:
        sigma = np.linalg.svd(embeddings.astype(np.float64), compute_uv=False)
        return rankme_from_singular_values(sigma)

    gram_s, gram_value = _median_seconds(lambda: rankme(embeddings), args.repeats)
    svd_s, svd_value = _median_seconds(direct_svd, args.repeats)
    speedup = svd_s / gram_s
    relative_difference = abs(gram_value - svd_value) / abs(svd_value)
    print(f"RankMe {args.n_samples} x {args.n_features}, {args.threads} threads, median of {args.repeats}")
    print(f"  gram route (float64): {gram_s:.3f} s  value {gram_value:.6f}")
    print(f"  direct SVD (float64): {svd_s:.3f} s  value {svd_value:.6f}")
    print(f"  speed-up {speedup:.1f}x, relative difference {relative_difference:.2e}")
    targets_met = gram_s <= 1.0 and speedup >= 5.0 and relative_difference <= 1e-6
    print("  targets (<= 1 s, >= 5x, <= 1e-6 rel):", "met" if targets_met else "MISSED")
    return 0 if targets_met else 1


if __name__ == "__main__":
    sys.exit(main())
