"""pipeline.tracking.system_metrics: MLflow's system-metrics monitor writing into a real run."""

from __future__ import annotations

import time

import psutil
import pytest

from pipeline.tracking import runs as tracking
from pipeline.tracking.system_metrics import node_system_metrics, samples_this_node

CPU_KEY = "system/node-1/cpu_utilization_percentage"
MEMORY_KEY = "system/node-1/system_memory_usage_megabytes"


def test_one_worker_per_node_samples_and_only_rank_0_with_sqlite():
    server, sqlite = "http://head:5000", "sqlite:////tmp/mlflow.db"
    # (world rank, local rank): two nodes of two workers each.
    workers = [(0, 0), (1, 1), (2, 0), (3, 1)]
    assert [samples_this_node(server, world_rank=world, local_rank=local) for world, local in workers] == [
        True,
        False,
        True,
        False,
    ]
    assert [samples_this_node(sqlite, world_rank=world, local_rank=local) for world, local in workers] == [
        True,
        False,
        False,
        False,
    ]


def _sample_for(run: tracking.TrackedRun, seconds: float, *, every_s: float) -> None:
    with node_system_metrics(run.tracking_uri, run.run_id, every_s=every_s, world_rank=0, local_rank=0, node_rank=1):
        time.sleep(seconds)


def test_a_short_block_logs_cpu_and_memory_of_its_node(tracking_uri):
    run = tracking.start_or_resume_run(tracking_uri=tracking_uri, experiment_name="system", run_name="sampled")
    _sample_for(run, 1.6, every_s=0.25)
    metrics = tracking.read_run(tracking_uri, run.run_id)["metrics"]
    assert len(metrics[CPU_KEY]) >= 2, metrics.get(CPU_KEY)  # at least one interval, and the end
    assert all(0.0 <= value <= 100.0 * psutil.cpu_count() for _, value in metrics[CPU_KEY])
    total_mb = psutil.virtual_memory().total / 1e6
    assert all(0.0 < value < total_mb for _, value in metrics[MEMORY_KEY])
    assert [step for step, _ in metrics[CPU_KEY]] == list(range(len(metrics[CPU_KEY])))


def test_a_resumed_run_continues_the_sample_steps(tracking_uri):
    run = tracking.start_or_resume_run(tracking_uri=tracking_uri, experiment_name="system", run_name="resumed")
    _sample_for(run, 0.8, every_s=0.2)
    first = [step for step, _ in tracking.read_run(tracking_uri, run.run_id)["metrics"][CPU_KEY]]
    _sample_for(run, 0.8, every_s=0.2)
    both = [step for step, _ in tracking.read_run(tracking_uri, run.run_id)["metrics"][CPU_KEY]]
    assert first and both[: len(first)] == first and len(both) > len(first)
    assert both == list(range(len(both)))  # no step written twice


def test_a_block_shorter_than_the_interval_still_logs_its_node_once(tracking_uri):
    """Speed-independent: a block logs a sample when it ends, whatever fits in it before (a fast
    machine finished a 6-step run before the first interval and logged nothing)."""
    run = tracking.start_or_resume_run(tracking_uri=tracking_uri, experiment_name="system", run_name="short")
    _sample_for(run, 0.0, every_s=30.0)
    metrics = tracking.read_run(tracking_uri, run.run_id)["metrics"]
    assert [step for step, _ in metrics[CPU_KEY]] == [0]
    assert [step for step, _ in metrics[MEMORY_KEY]] == [0]


@pytest.mark.parametrize("every_s, rank", [(0, 0), (0.2, 1)])
def test_nothing_is_logged_when_off_or_not_this_workers_node(tracking_uri, every_s, rank):
    run = tracking.start_or_resume_run(tracking_uri=tracking_uri, experiment_name="system", run_name=f"off-{rank}")
    with node_system_metrics(tracking_uri, run.run_id, every_s=every_s, world_rank=rank, local_rank=rank, node_rank=0):
        time.sleep(0.7)
    assert not any(key.startswith("system/") for key in tracking.read_run(tracking_uri, run.run_id)["metrics"])
