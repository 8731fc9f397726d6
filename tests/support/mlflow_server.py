"""A real `mlflow server` on 127.0.0.1 for the tests of tracking across nodes: the cluster
rehearsal's own (`cluster.rehearsal.tracking_server`), re-exported under the name the tests use."""

from __future__ import annotations

from cluster.rehearsal.object_store import free_port
from cluster.rehearsal.tracking_server import running_mlflow_server

__all__ = ["free_port", "running_mlflow_server"]
