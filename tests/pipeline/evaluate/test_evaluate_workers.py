"""Scoring tasks in worker processes gives the numbers a serial run gives, also inside a Ray task."""

from __future__ import annotations

import pytest
import torch

import models
from pipeline.checkpoint import save_model_checkpoint
from pipeline.evaluate.probes.grid import ProbeTrainingConfig
from pipeline.evaluate.run import evaluate_checkpoint
from tests.support.hear_task_fixtures import build_tiny_tasks

SHORT = ProbeTrainingConfig(max_epochs=9, patience_checks=2, grid_points=2)


@pytest.fixture(scope="module")
def tasks_dir(tmp_path_factory):
    return build_tiny_tasks(tmp_path_factory.mktemp("tasks"))


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    torch.manual_seed(0)
    model = models.build_model("mae-debug")
    return save_model_checkpoint(
        tmp_path_factory.mktemp("ckpt"), model, model_name="mae-debug", overrides={}, step=3, shard_fingerprint="t"
    )


def _numbers(result):
    return result.q, result.task_rankme, {task: score["seed_scores"] for task, score in result.task_scores.items()}


@pytest.fixture(scope="module")
def serial(checkpoint, tasks_dir):
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the workers run one thread each; the same arithmetic, bit for bit
    try:
        return evaluate_checkpoint(
            checkpoint, tasks_dir=tasks_dir, task_rankme_n=50, seeds=2, probe_training=SHORT, workers=1
        )
    finally:
        torch.set_num_threads(threads)


def test_two_worker_processes_give_the_serial_numbers(checkpoint, tasks_dir, serial):
    parallel = evaluate_checkpoint(
        checkpoint, tasks_dir=tasks_dir, task_rankme_n=50, seeds=2, probe_training=SHORT, workers=2
    )
    assert (
        list(parallel.task_scores) == list(serial.task_scores) == ["mixtures", "tones"]
    )  # task order, not finish order
    assert _numbers(parallel) == _numbers(serial)
    assert serial.task_scores["tones"]["mean"] > 0.6  # real scores, not a degenerate agreement
    assert all(parallel.seconds[f"probe/{task}"] > 0 for task in parallel.task_scores)


def test_worker_processes_start_inside_a_ray_task(ray_local, checkpoint, tasks_dir, serial):
    # A study trial evaluates inside a Ray actor with a fraction of a CPU; its workers are spawned.
    # (Only importable names inside: Ray pickles the function, and this test module is not a package.)
    short = SHORT

    @ray_local.remote(num_cpus=0.5)
    def evaluate_in_ray() -> tuple:
        from pipeline.evaluate.run import evaluate_checkpoint

        result = evaluate_checkpoint(
            checkpoint, tasks_dir=tasks_dir, task_rankme_n=50, seeds=2, probe_training=short, workers=2
        )
        return result.q, result.task_rankme, {task: score["seed_scores"] for task, score in result.task_scores.items()}

    assert ray_local.get(evaluate_in_ray.remote()) == _numbers(serial)


def test_workers_below_one_is_an_error(checkpoint, tasks_dir):
    with pytest.raises(ValueError, match="workers must be at least 1"):
        evaluate_checkpoint(checkpoint, tasks_dir=tasks_dir, task_rankme_n=50, seeds=1, probe_training=SHORT, workers=0)
