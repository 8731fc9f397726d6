"""How often the advisor's 95% intervals hold the true compute-optimal point (100 seeded synthetic studies).

Each study: 5 sizes (1e5-1e7 parameters) x 5 data volumes (1-100 h) x 2 training seeds, Q from a known
Q(N, D) (sweeps/laws/known_law_study.py) plus noise of SD 0.003, training FLOPs per sample
6 N x 250, each clip seen once. The budget is 3x the largest trial; the true optimum comes from the
true law along the same iso-compute curve. `sweeps.report.advice.advise` fits each study as a real
one (configurations as the bootstrap unit) and the benchmark counts how often N_opt, D_opt and Q_opt
fall inside their intervals, with a Wilson 95% interval over the studies.

    python benchmarks/advise_coverage.py [--studies 100] [--n-bootstrap 100]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from law_interval_coverage import wilson_interval  # noqa: E402

from sweeps.laws.allocation import FlopsPerSample, quality_optimum  # noqa: E402
from sweeps.laws.forms import JointLaw  # noqa: E402
from sweeps.laws.known_law_study import TRUE_LAW, synthetic_study  # noqa: E402
from sweeps.report.advice import advise  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--studies", type=int, default=100)
    parser.add_argument("--n-bootstrap", type=int, default=100)
    args = parser.parse_args(argv)
    reference = synthetic_study(0)
    budget = 3.0 * float(reference["flops"].max())
    flops = FlopsPerSample.fit(reference["n_params"], reference["training_flops_per_sample"])
    truth = quality_optimum(lambda n, d: JointLaw().predict(TRUE_LAW, n, d), flops, budget, (1e3, 1e9))
    print(f"true optimum at {budget:.3g} FLOPs: N {truth.n_params:.4g}, D {truth.hours:.4g} h, Q {truth.q:.4f}")
    hits, start = {"N_opt": [], "D_opt": [], "Q_opt": []}, time.perf_counter()
    for seed in range(args.studies):
        advice = advise(synthetic_study(seed), budget, n_bootstrap=args.n_bootstrap, seed=seed)
        for key, interval, true in zip(
            hits, (advice.n_params, advice.hours, advice.q), (truth.n_params, truth.hours, truth.q)
        ):
            hits[key].append(interval.low <= true <= interval.high)
        if (seed + 1) % 10 == 0:
            elapsed = time.perf_counter() - start
            print(
                f"{seed + 1}/{args.studies} studies, {elapsed:.0f} s, about {elapsed / (seed + 1) * (args.studies - seed - 1):.0f} s left",
                flush=True,
            )
    print(f"\n{args.studies} studies, {args.n_bootstrap} bootstrap refits each: coverage of the 95% intervals")
    for key, found in hits.items():
        low, high = wilson_interval(int(np.sum(found)), len(found))
        print(f"{key:<6} {np.mean(found):.3f} (Wilson 95% {low:.3f}-{high:.3f})")
    together = np.all(list(hits.values()), axis=0)
    print(f"all    {np.mean(together):.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
