"""A real `mlflow server` on 127.0.0.1, started as a cluster head starts it (cluster/ray-up,
cluster/kuberay): a SQLite run database, artifacts proxied by the server (`--serve-artifacts` into
`--artifacts-destination`, a folder or a bucket), and optionally MLflow's basic-auth app.

With a bucket destination the server, not the clients, holds the store's credentials: clients
upload and download through the server's HTTP API (`mlflow-artifacts:/...`) and need neither boto3
credentials nor a shared disk, which is what cluster/README.md promises.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import secrets
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path

from cluster.rehearsal.object_store import free_port
from cluster.rehearsal.server_process import start_server, stop_group, wait_until_ready

START_TIMEOUT_S = 120  # the first start creates the SQLite schema (MLflow's migrations): ~10 s on 2 cores
ADMIN = "admin"
# How long the basic-auth app keeps a checked password (MLflow's default 0 checks the hash on every
# request: a trial's child run then took 9.9 s instead of 0.35 s, docs/performance.md). The cluster
# configurations set the same; a changed password can keep working that long on another server worker.
AUTH_CACHE_TTL_S = 600


@dataclasses.dataclass(frozen=True)
class TrackingServer:
    uri: str
    password: str | None  # the admin's, when the basic-auth app runs

    def client_env(self) -> dict[str, str]:
        """What a client process (a job, a Ray worker) needs to log here."""
        # MLflow 3.17's clients download an artifact straight from the bucket through a presigned URL
        # the server hands out; moto refuses presigned requests when it enforces IAM (a KeyError on
        # the missing Authorization header, HTTP 500), so here downloads go through the server.
        env = {"MLFLOW_TRACKING_URI": self.uri, "MLFLOW_ENABLE_PROXY_MULTIPART_DOWNLOAD": "false"}
        if self.password:
            env |= {"MLFLOW_TRACKING_USERNAME": ADMIN, "MLFLOW_TRACKING_PASSWORD": self.password}
        return env


def _auth_config(root: Path, password: str, *, cache_ttl_s: int = AUTH_CACHE_TTL_S) -> Path:
    """The basic-auth app's ini: users in their own SQLite file, READ for anyone but the admin, checked
    passwords cached for `cache_ttl_s` (0: MLflow's default, no cache)."""
    path = root / "basic_auth.ini"
    path.write_text(
        "[mlflow]\n"
        "default_permission = READ\n"
        f"database_uri = sqlite:///{root / 'basic_auth.db'}\n"
        f"admin_username = {ADMIN}\n"
        f"admin_password = {password}\n"
        "authorization_function = mlflow.server.auth:authenticate_request_basic_auth\n"
        f"auth_cache_ttl_seconds = {cache_ttl_s}\n"
    )
    return path


def server_argv(root: Path, *, port: int, artifacts: str | None, basic_auth: bool) -> list[str]:
    """The `mlflow server` command line (cluster/README.md shows it with its placeholders)."""
    argv = [
        "mlflow", "server", "--host", "127.0.0.1", "--port", str(port), "--workers", "1",
        "--backend-store-uri", f"sqlite:///{root / 'mlflow.db'}",
        "--serve-artifacts", "--artifacts-destination", artifacts or str(root / "artifacts"),
    ]  # fmt: skip
    return argv + (["--app-name", "basic-auth"] if basic_auth else [])


@contextlib.contextmanager
def running_mlflow_server(
    root: Path, *, artifacts: str | None = None, store_env: dict[str, str] | None = None, basic_auth: bool = False
) -> Iterator[str]:
    """`mlflow server` with its database in root/mlflow.db and artifacts in `artifacts` (default
    root/artifacts; an `s3://` URI needs `store_env`: the AWS variables and MLFLOW_S3_ENDPOINT_URL);
    yields its URI. With `basic_auth`, use `running_tracking_server` to get the password too."""
    with running_tracking_server(root, artifacts=artifacts, store_env=store_env, basic_auth=basic_auth) as server:
        yield server.uri


@contextlib.contextmanager
def running_tracking_server(
    root: Path,
    *,
    artifacts: str | None = None,
    store_env: dict[str, str] | None = None,
    basic_auth: bool = False,
    auth_cache_ttl_s: int = AUTH_CACHE_TTL_S,
) -> Iterator[TrackingServer]:
    port = free_port()
    command = [sys.executable, "-m", *server_argv(root, port=port, artifacts=artifacts, basic_auth=basic_auth)]
    env = {**os.environ, **(store_env or {})}
    password = None
    if basic_auth:
        password = secrets.token_hex(24)
        env |= {
            "MLFLOW_AUTH_CONFIG_PATH": str(_auth_config(root, password, cache_ttl_s=auth_cache_ttl_s)),
            "MLFLOW_FLASK_SERVER_SECRET_KEY": secrets.token_hex(24),
        }
    log_path = root / "mlflow-server.log"
    server = start_server(command, log_path, env=env, cwd=root)
    uri = f"http://127.0.0.1:{port}"
    try:
        wait_until_ready(server, lambda: _healthy(uri), what="mlflow server", log_path=log_path,
                         timeout_s=START_TIMEOUT_S)  # fmt: skip
        yield TrackingServer(uri=uri, password=password)
    finally:
        stop_group(server)


def _healthy(uri: str) -> bool:
    with urllib.request.urlopen(f"{uri}/health", timeout=2) as response:
        return response.status == 200
