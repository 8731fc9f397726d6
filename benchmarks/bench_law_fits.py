"""The laws of a finished study fitted again, twice side by side: finding the process's thread pools
once (what sweeps.laws.optimizer does) against finding them again at every local L-BFGS-B fit (a
fresh `threadpool_limits` each time, as it used to); nothing is logged.

    python benchmarks/bench_law_fits.py --study mask_ratio-cpu_default [--tracking-uri URI] [--n-bootstrap 200]

torch is imported first, as in the study driver, because what a pool search costs grows with the
libraries the process has loaded. Prints the seconds of each, their ratio, what one pool search
costs, and whether the two fits agree to the bit (they must: the limits are the same).
"""

from __future__ import annotations

import argparse
import json
import time

import torch  # noqa: F401  (loaded as in the driver: the pool search reads every mapped library)
from threadpoolctl import ThreadpoolController

from pipeline.tracking import runs as tracking
from sweeps.laws import optimizer
from sweeps.record.study import read_study
from sweeps.report.study_fits import fit_study_laws
from sweeps.study.law_analysis import study_info


def _timed_fit(table, *, n_bootstrap: int, grid: str | None) -> tuple[float, str]:
    started = time.perf_counter()
    fits = fit_study_laws(table, n_bootstrap=n_bootstrap, grid=grid)
    seconds = time.perf_counter() - started
    return seconds, json.dumps({name: fit.to_dict() for name, fit in fits.fits.items()}, sort_keys=True, default=str)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--study", default="mask_ratio-cpu_default", help="the study's name (its parent run)")
    parser.add_argument("--tracking-uri", default=None, help="None: $MLFLOW_TRACKING_URI or the embedded store")
    parser.add_argument("--n-bootstrap", type=int, default=200, help="the study's resamples (its default: 200)")
    args = parser.parse_args()
    study = read_study(tracking.checked_store(args.tracking_uri), args.study)
    if study.trial_table.empty:
        raise SystemExit(f"study {args.study!r} has no trial runs; run `python -m sweeps.scaling` first")
    grid = study_info(study.settings).grid or None
    started = time.perf_counter()
    searches = 20
    for _ in range(searches):
        ThreadpoolController()
    per_search_ms = 1000 * (time.perf_counter() - started) / searches
    cached, cached_fits = _timed_fit(study.trial_table, n_bootstrap=args.n_bootstrap, grid=grid)
    found_once = optimizer._thread_pools
    optimizer._thread_pools = ThreadpoolController  # a new search at every local fit
    try:
        searching, searching_fits = _timed_fit(study.trial_table, n_bootstrap=args.n_bootstrap, grid=grid)
    finally:
        optimizer._thread_pools = found_once
    print(f"study {args.study}: {len(study.trial_table)} trial(s), {args.n_bootstrap} bootstrap resamples")
    print(f"one thread-pool search: {per_search_ms:.1f} ms (mean of {searches})")
    print(
        f"pools found once: {cached:.1f} s; found at every local fit: {searching:.1f} s; ratio {searching / cached:.2f}x"
    )
    print(f"fits identical to the bit: {cached_fits == searching_fits}")
    return 0 if cached_fits == searching_fits else 1


if __name__ == "__main__":
    raise SystemExit(main())
