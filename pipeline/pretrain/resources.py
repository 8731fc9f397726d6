"""CPUs per training worker, sized so the crop reader always has CPU left.

The workers' placement group holds its CPUs for the whole run, and the crop reader is a Ray Data
task that needs READER_CPUS of its own: when the workers hold every CPU the reader never starts
and training waits forever with nothing printed (2 workers of 1 CPU on a 2-CPU machine did).
So the default shares out what the reader leaves, and a size that cannot fit is refused up front
with the numbers.
"""

from __future__ import annotations

import math

from pipeline.cli_errors import UserError

# The crop reader's Ray Data task (pipeline/shards/crops.py, `num_cpus_per_task`).
READER_CPUS = 0.5


def default_worker_cpus(num_workers: int, cluster_cpus: float) -> float:
    """Whole CPUs when one is left to the reader and the driver; else a share of what the reader leaves."""
    whole = math.floor((cluster_cpus - 1.0) / num_workers)
    if whole >= 1:
        return float(whole)
    return (cluster_cpus - READER_CPUS) / num_workers


def check_workers_fit(num_workers: int, cpus_per_worker: float, cluster_cpus: float) -> None:
    """Refuse workers that leave the reader no CPU: the run would wait forever."""
    needed = num_workers * cpus_per_worker + READER_CPUS
    if needed > cluster_cpus + 1e-9:
        fits = (cluster_cpus - READER_CPUS) / num_workers
        raise UserError(
            f"--num-workers {num_workers} x --cpus-per-worker {cpus_per_worker:g} + {READER_CPUS:g} for the data "
            f"reader = {needed:g} CPUs, but Ray has {cluster_cpus:g}; this would wait forever. Fits: "
            f"--cpus-per-worker {math.floor(fits * 100) / 100:g} or less (or leave it out), or fewer workers"
        )
