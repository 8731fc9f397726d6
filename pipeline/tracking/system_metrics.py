"""MLflow system metrics of the nodes a pretraining run trains on: CPU, memory, disk, network, and the
GPUs when present, sampled by MLflow's own `SystemMetricsMonitor` thread inside a Ray Train worker.

Why a monitor per node and not `mlflow.start_run(log_system_metrics=True)`: the run belongs to the
driver, which may sit on a head node without the workers' GPUs, and the project logs through
`pipeline.tracking.runs.TrackedRun` (a client, no fluent active run). So the first worker on each node
samples its node and logs under `system/node-<node rank>/...` (e.g.
`system/node-0/cpu_utilization_percentage`), which the MLflow UI shows on the run's system-metrics tab.

With a SQLite store only rank 0 (node 0) samples: the store has one writer per run by convention
(`pipeline.tracking.runs`), and other nodes could not reach the file anyway. A tracking server takes one
monitor per node.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from mlflow.system_metrics.system_metrics_monitor import SystemMetricsMonitor

SYSTEM_METRICS_PREFIX = "system/"  # MLflow's prefix for system metrics (SystemMetricsMonitor)


def node_label(node_rank: int) -> str:
    return f"node-{node_rank}"


def samples_this_node(tracking_uri: str, *, world_rank: int, local_rank: int) -> bool:
    """True on the one worker per node that samples it: local rank 0, and only rank 0 with a SQLite store."""
    if tracking_uri.startswith("sqlite:"):
        return world_rank == 0
    return local_rank == 0


@contextlib.contextmanager
def node_system_metrics(
    tracking_uri: str, run_id: str | None, *, every_s: float, world_rank: int, local_rank: int, node_rank: int
) -> Iterator[None]:
    """Sample this node every `every_s` seconds into the run while the block runs, when this worker is
    the one that samples it (`samples_this_node`); every_s 0 or no run: nothing.

    A sample is logged each time its interval passes and once more when the block ends, so every
    block logs at least one however fast the machine (MLflow's monitor drops what it collected
    after its last interval). A resumed run continues the system metrics' step count rather than
    writing over it.
    """
    samples = samples_this_node(tracking_uri, world_rank=world_rank, local_rank=local_rank)
    if every_s <= 0 or run_id is None or not samples:
        yield
        return
    monitor = SystemMetricsMonitor(
        run_id, sampling_interval=every_s, resume_logging=True, node_id=node_label(node_rank), tracking_uri=tracking_uri
    )
    monitor.start()
    try:
        yield
    finally:
        monitor.finish()  # stops the thread and flushes what it has batched
        # The block's last state: the monitor thread has stopped, so this step number is free.
        monitor.collect_metrics()
        monitor.publish_metrics(monitor.aggregate_metrics())
        monitor.mlflow_logger.flush()
