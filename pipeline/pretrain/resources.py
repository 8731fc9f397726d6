"""CPUs per training worker, and sizes Ray could never place refused up front.

The workers' placement group holds its CPUs for the whole run. Each worker reads its own crops in a
thread of its own process (`pipeline.pretrain.data`), so no separate reader task needs a CPU of
Ray's; the default leaves one CPU to the driver when there are enough, and otherwise shares the
cluster's CPUs out. A size larger than the cluster would wait forever for its placement group with
nothing printed, so it is refused with the numbers.
"""

from __future__ import annotations

import math

from pipeline.cli.errors import UserError


def default_worker_cpus(num_workers: int, cluster_cpus: float) -> float:
    """Whole CPUs when one is left to the driver; else an equal share of every CPU."""
    whole = math.floor((cluster_cpus - 1.0) / num_workers)
    if whole >= 1:
        return float(whole)
    return cluster_cpus / num_workers


def check_workers_fit(num_workers: int, cpus_per_worker: float, cluster_cpus: float) -> None:
    """Refuse workers that need more CPUs than Ray has: their placement group would wait forever."""
    needed = num_workers * cpus_per_worker
    if needed > cluster_cpus + 1e-9:
        fits = cluster_cpus / num_workers
        raise UserError(
            f"--num-workers {num_workers} x --cpus-per-worker {cpus_per_worker:g} = {needed:g} CPUs, but Ray has "
            f"{cluster_cpus:g}; this would wait forever. Fits: --cpus-per-worker {math.floor(fits * 100) / 100:g} "
            "or less (or leave it out), or fewer workers"
        )
