"""How often the reference estimator's 95% bootstrap intervals cover the true parameters.

Synthetic studies with known parameters, shaped like a mask-ratio or size study's Q(R): 8
configurations whose RankMe spans 20-600, 3 training seeds each (the bootstrap unit is the
configuration), Q = Q_inf - (R_c / R)^alpha plus Gaussian noise of `--noise` (0.005: the test-clip
standard error of the default study's Q). Each study is fitted exactly as a study's law is
(sweeps.laws.fits.fit_saturating: least squares on Q, paper App. E; percentile bootstrap over
configurations) and each parameter's interval checked against the truth. Coverage is shown with a
Wilson 95% interval over the studies, so "95%" is only claimed where the studies can tell.

    python benchmarks/law_interval_coverage.py [--studies 200] [--n-bootstrap 200] [--noise 0.005]

Prints one line of progress every 20 studies, then per parameter the coverage with its interval,
the median interval width, and how often all three intervals covered together.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
from scipy.stats import norm

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sweeps.laws.fits import fit_saturating  # noqa: E402
from sweeps.laws.forms import SaturatingLaw  # noqa: E402
from sweeps.laws.optimizer import FitNotConvergedError  # noqa: E402

TRUTH = {"q_inf": 0.80, "x_c": 10.0, "alpha": 0.6}
RANKME = np.geomspace(20.0, 600.0, 8)
SEEDS_PER_CONFIGURATION = 3


def wilson_interval(hits: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson score interval of a binomial proportion (better than the normal one near 0.95)."""
    z = float(norm.ppf(0.5 + confidence / 2.0))
    p = hits / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return centre - half, centre + half


def one_study(rng: np.random.Generator, noise: float, n_bootstrap: int, seed: int) -> dict[str, tuple[float, float]]:
    rankme = np.repeat(RANKME, SEEDS_PER_CONFIGURATION)
    q = SaturatingLaw().predict(TRUTH, rankme) + rng.normal(0.0, noise, len(rankme))
    groups = np.repeat(np.arange(len(RANKME)), SEEDS_PER_CONFIGURATION)
    return fit_saturating(rankme, q, groups=groups, n_bootstrap=n_bootstrap, extrapolate=False, seed=seed).ci


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--studies", type=int, default=200)
    parser.add_argument("--n-bootstrap", type=int, default=200, help="resamples per fit (a study's default: 200)")
    parser.add_argument("--noise", type=float, default=0.005, help="standard deviation of Q's noise per trial")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    rng = np.random.default_rng(args.seed)
    covered = {name: [] for name in TRUTH}
    widths = {name: [] for name in TRUTH}
    failed, start = 0, time.perf_counter()
    for index in range(args.studies):
        try:
            ci = one_study(rng, args.noise, args.n_bootstrap, seed=index)
        except FitNotConvergedError:
            failed += 1
            continue
        for name, truth in TRUTH.items():
            covered[name].append(ci[name][0] <= truth <= ci[name][1])
            widths[name].append(ci[name][1] - ci[name][0])
        if (index + 1) % 20 == 0:
            elapsed = time.perf_counter() - start
            left = elapsed / (index + 1) * (args.studies - index - 1)
            print(f"{index + 1}/{args.studies} studies fitted, {elapsed:.0f} s, about {left:.0f} s left", flush=True)
    n = len(covered["alpha"])
    print(f"\nreference estimator (App. E), {n} studies ({failed} fits did not converge), "
          f"{args.n_bootstrap} resamples each, noise sd {args.noise}, truth {TRUTH}")  # fmt: skip
    print(f"{'parameter':<10} {'coverage':>9} {'Wilson 95%':>16} {'median width':>13}")
    for name in TRUTH:
        hits = int(np.sum(covered[name]))
        low, high = wilson_interval(hits, n)
        print(f"{name:<10} {hits / n:>9.3f} {f'{low:.3f}-{high:.3f}':>16} {np.median(widths[name]):>13.4g}")
    together = int(np.sum(np.all([covered[name] for name in TRUTH], axis=0)))
    low, high = wilson_interval(together, n)
    print(f"{'all three':<10} {together / n:>9.3f} {f'{low:.3f}-{high:.3f}':>16}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
