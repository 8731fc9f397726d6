"""How often Ray Train's controller polls its workers: every 0.5 s unless the user has chosen.

Ray Train 2.60's controller polls the worker group once per `RAY_TRAIN_HEALTH_CHECK_INTERVAL_S`
(Ray's default 2 s). It takes at most one `ray.train.report` per worker per poll, and it notices
that the workers have finished only on a poll, so each run waits on several polls at its checkpoint
steps and its tail. At 0.5 s a short run took 0.81x the wall time of the same run at 2 s, with the same
losses (docs/performance.md, "Reporting from the training loop"), and a study runs many short runs.

A poll is one small actor call per worker, and a poll slower than the interval is no failure: it is
simply awaited on the next poll, and only one that hangs for `RAY_TRAIN_WORKER_HEALTH_CHECK_TIMEOUT_S`
(10 min) marks a worker dead. On a cluster of many workers a user who wants fewer calls sets the
variable; a value already in the environment is never changed.
"""

from __future__ import annotations

import os

HEALTH_CHECK_ENV = "RAY_TRAIN_HEALTH_CHECK_INTERVAL_S"
HEALTH_CHECK_INTERVAL_S = 0.5


def poll_workers_often() -> str:
    """Set the poll interval for the Ray Train runs this process starts, unless already set; the value in force.

    Ray Train forwards the variable from the process that calls `fit()` to its controller (the
    variables it propagates are read from this process's environment when `fit()` starts the controller).
    """
    return os.environ.setdefault(HEALTH_CHECK_ENV, str(HEALTH_CHECK_INTERVAL_S))
