"""Two Ray nodes on one machine: `ray start --head` and `ray start --address`, each with its own temp
folder and ports, loopback only, as a two-machine cluster starts them (cluster/ray-up).

Every port is a free one, so the nodes cannot join or disturb another Ray on the machine. A node is
stopped by signalling its own `ray start --block` process, never `ray stop` (which stops every Ray
instance on the machine). `kill_worker_node` is a machine that loses power: SIGKILL to the worker
node's `ray start`, its raylet and every process under it, with no chance to clean up.

The short temp folders under /tmp keep Unix socket paths under their length cap, and keep
`ray_current_cluster` out of /tmp/ray: left there, it makes later `ray.init()` calls try to join.
"""

from __future__ import annotations

import contextlib
import dataclasses
import http.client
import os
import secrets
import shlex
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import psutil

START_TIMEOUT_S = 120  # the job API answers ~10-20 s after the head's start on 2 busy cores
JOIN_TIMEOUT_S = 120
GRACE_S = 5


# No per-node metrics servers (they listen on every interface, unauthenticated): a rehearsal reads none.
NODE_SETTINGS = {"RAY_enable_metrics_collection": "0"}
# One token per process that starts nodes: its nodes, and every client and job it runs, share it.
CLUSTER_TOKEN = secrets.token_hex(32)


def ray_client_env(**extra: str) -> dict[str, str]:
    """This environment without $RAY_ADDRESS (it would point the clients elsewhere), with Ray's token
    authentication on: the GCS of a `ray start` node listens on every interface whatever
    --node-ip-address says, so nothing may reach it without the token (`listeners` checks)."""
    env = {k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS", "RAY_AUTH_TOKEN_PATH")}
    env.update({"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": CLUSTER_TOKEN, **extra})
    return env


def free_ports(count: int) -> list[int]:
    """`count` distinct free ports on 127.0.0.1 (held together while chosen, so none repeats)."""
    sockets = [socket.socket() for _ in range(count)]
    for held in sockets:
        held.bind(("127.0.0.1", 0))
    ports = [held.getsockname()[1] for held in sockets]
    for held in sockets:
        held.close()
    return ports


@dataclasses.dataclass
class Node:
    process: subprocess.Popen  # `ray start --block`
    temp_dir: str
    log_path: Path
    descendants: list[psutil.Process] = dataclasses.field(default_factory=list)

    def processes(self) -> list[psutil.Process]:
        """The node's processes now: its `ray start`, everything under it, and whatever names its temp
        folder (the GCS, raylet and dashboard daemonise out of the tree)."""
        found: dict[int, psutil.Process] = {}
        with contextlib.suppress(psutil.Error):
            root = psutil.Process(self.process.pid)
            found[root.pid] = root
            for child in root.children(recursive=True):
                found[child.pid] = child
        for process in psutil.process_iter(["pid", "cmdline"]):
            with contextlib.suppress(psutil.Error):
                if self.temp_dir in " ".join(process.info["cmdline"] or []):
                    found[process.pid] = process
        return list(found.values())


def _node_argv(temp_dir: str, *, num_cpus: int, head_port: int | None, gcs: str | None) -> list[str]:
    agent, agent_grpc, metrics, runtime_env, manager, objects = free_ports(6)
    argv = [
        "ray", "start", "--block", "--disable-usage-stats", f"--temp-dir={temp_dir}", f"--num-cpus={num_cpus}",
        "--node-ip-address=127.0.0.1", f"--object-store-memory={512 * 1024**2}",
        f"--dashboard-agent-listen-port={agent}", f"--dashboard-agent-grpc-port={agent_grpc}",
        f"--metrics-export-port={metrics}", f"--runtime-env-agent-port={runtime_env}",
        f"--node-manager-port={manager}", f"--object-manager-port={objects}",
    ]  # fmt: skip
    if gcs is not None:
        return [*argv, f"--address={gcs}"]
    dashboard, client = free_ports(2)
    return [
        *argv, "--head", f"--port={head_port}", "--include-dashboard=true", "--dashboard-host=127.0.0.1",
        f"--dashboard-port={dashboard}", f"--ray-client-server-port={client}",
    ]  # fmt: skip


def _start(argv: list[str], *, env: dict[str, str], log_path: Path, temp_dir: str) -> Node:
    with open(log_path, "w") as log:
        process = subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT)
    return Node(process=process, temp_dir=temp_dir, log_path=log_path)


@dataclasses.dataclass
class TwoNodes:
    gcs: str  # 127.0.0.1:PORT, what `ray start --address` and ray.init(address=...) take
    job_api: str  # http://127.0.0.1:PORT, what `ray job submit --address` takes
    head: Node
    worker: Node

    def kill_worker_node(self) -> int:
        """SIGKILL every process of the worker node at once; returns how many there were."""
        processes = self.worker.processes()
        for process in processes:
            with contextlib.suppress(psutil.Error):
                process.kill()
        psutil.wait_procs(processes, timeout=30)
        return len(processes)


@contextlib.contextmanager
def running_two_nodes(
    log_dir: Path,
    *,
    head_cpus: int,
    worker_cpus: int,
    env: dict[str, str] | None = None,
    hidden_from_worker: tuple[Path, ...] = (),
) -> Iterator[TwoNodes]:
    """A head with `head_cpus` and a worker node with `worker_cpus` joined to it; `env` (default:
    ray_client_env()) is the nodes' environment, which every worker process and submitted job inherits.
    `hidden_from_worker`: folders the worker node sees empty (an empty tmpfs mounted over each in a mount
    namespace of its own), as a second machine that shares no disk with the head sees them."""
    node_env = {**(env or ray_client_env()), **NODE_SETTINGS}
    gcs_port = free_ports(1)[0]
    head_temp = tempfile.mkdtemp(prefix="rh-head-", dir="/tmp")
    worker_temp = tempfile.mkdtemp(prefix="rh-node-", dir="/tmp")
    head_argv = _node_argv(head_temp, num_cpus=head_cpus, head_port=gcs_port, gcs=None)
    job_api = f"http://127.0.0.1:{next(a.split('=')[1] for a in head_argv if a.startswith('--dashboard-port='))}"
    gcs = f"127.0.0.1:{gcs_port}"
    nodes: list[Node] = []
    try:
        nodes.append(_start(head_argv, env=node_env, log_path=log_dir / "ray-head.log", temp_dir=head_temp))
        _wait_for_job_api(nodes[0], job_api)
        worker_argv = _hiding(
            hidden_from_worker, _node_argv(worker_temp, num_cpus=worker_cpus, head_port=None, gcs=gcs)
        )
        nodes.append(_start(worker_argv, env=node_env, log_path=log_dir / "ray-worker-node.log", temp_dir=worker_temp))
        _wait_for_nodes(gcs, 2, nodes[1])
        yield TwoNodes(gcs=gcs, job_api=job_api, head=nodes[0], worker=nodes[1])
    finally:
        for node in reversed(nodes):
            _stop(node)
        for folder in (head_temp, worker_temp):
            shutil.rmtree(folder, ignore_errors=True)


def _hiding(folders: tuple[Path, ...], argv: list[str]) -> list[str]:
    """`argv` run in a private mount namespace in which each folder is an empty tmpfs (needs root)."""
    if not folders:
        return argv
    mounts = "".join(f"mount -t tmpfs none {shlex.quote(str(folder))} && " for folder in folders)
    return ["unshare", "--mount", "--propagation", "private", "sh", "-c", f"{mounts}exec {shlex.join(argv)}"]


def job_client(nodes: TwoNodes):
    """Ray's job client for the nodes' job API, the token in its headers: a process whose own Ray was set
    up in another auth mode (a test session's) caches that mode and would send none."""
    from ray.job_submission import JobSubmissionClient

    return JobSubmissionClient(nodes.job_api, headers={"Authorization": f"Bearer {CLUSTER_TOKEN}"})


def listeners(nodes: TwoNodes) -> list[tuple[str, str, int]]:
    """(process name, address, port) of every socket the two nodes' processes listen on."""
    found = set()
    for process in nodes.head.processes() + nodes.worker.processes():
        with contextlib.suppress(psutil.Error):
            for connection in process.net_connections(kind="inet"):
                if connection.status == psutil.CONN_LISTEN:
                    found.add((process.name(), connection.laddr.ip, connection.laddr.port))
    return sorted(found)


# The head's two Prometheus endpoints (ray/dashboard/head.py, ray/autoscaler/v2/monitor.py): Ray binds them
# to every interface unless the head's own address is loopback, which a node that others join cannot have.
# Read-only metrics, no way to run code; cluster/README.md says to keep these ports behind the firewall.
HEAD_METRICS_PORTS = (44217, 44227)


def _http_status(port: int) -> int | None:
    """The status of GET / without a token, or None when the port does not speak HTTP."""
    try:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
        connection.request("GET", "/")
        return connection.getresponse().status
    except (OSError, http.client.HTTPException):
        return None


def _grpc_codes(port: int) -> set[str]:
    """What a GCS and a raylet method answer without a token on `port` (UNAUTHENTICATED: refused)."""
    import grpc
    from ray.core.generated import gcs_service_pb2, gcs_service_pb2_grpc, node_manager_pb2, node_manager_pb2_grpc

    codes = set()
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        for call, request in (
            (gcs_service_pb2_grpc.NodeInfoGcsServiceStub(channel).GetAllNodeInfo, gcs_service_pb2.GetAllNodeInfoRequest()),
            (node_manager_pb2_grpc.NodeManagerServiceStub(channel).GetNodeStats, node_manager_pb2.GetNodeStatsRequest()),
        ):  # fmt: skip
            try:
                call(request, timeout=10)
                codes.add("OK")
            except grpc.RpcError as error:
                codes.add(error.code().name)
    return codes


def audit_listeners(nodes: TwoNodes) -> dict:
    """Every socket the nodes listen on; each one beyond loopback called without the token. Raises
    RuntimeError when one of them answers a client without the token (beyond the head's metrics)."""
    found = listeners(nodes)
    beyond = [(name, address, port) for name, address, port in found if not _loopback(address)]
    refused, metrics, unverified, open_ = [], [], [], []
    for _, _, port in beyond:
        status = _http_status(port)
        if status is not None:
            (metrics if port in HEAD_METRICS_PORTS else refused if status in (401, 403) else open_).append(port)
            continue
        codes = _grpc_codes(port)
        (open_ if "OK" in codes else refused if "UNAUTHENTICATED" in codes else unverified).append(port)
    if open_:
        raise RuntimeError(f"listeners beyond loopback that answer without the token: {sorted(set(open_))} ({beyond})")
    return {
        "listeners": len(found), "beyond_loopback": len(beyond), "refused_without_token": len(refused),
        "head_metrics_unauthenticated": len(metrics), "grpc_not_probed": len(unverified),
    }  # fmt: skip


def _loopback(address: str) -> bool:
    return address.startswith("127.") or address in ("::1", "::ffff:127.0.0.1")


def alive_nodes(gcs: str) -> int:
    """How many nodes the cluster's GCS counts alive (`ray list nodes`, from a separate process)."""
    listed = subprocess.run(
        ["ray", "list", "nodes", "--address", gcs, "--filter", "state=ALIVE", "--format", "json"],
        env=ray_client_env(), capture_output=True, text=True, check=False, timeout=60,
    )  # fmt: skip
    if listed.returncode != 0:
        return 0
    import json

    return len(json.loads(listed.stdout or "[]"))


def _wait_for_nodes(gcs: str, count: int, joining: Node) -> None:
    deadline = time.monotonic() + JOIN_TIMEOUT_S
    while alive_nodes(gcs) < count:
        if joining.process.poll() is not None:
            raise RuntimeError(
                f"ray start exited with {joining.process.returncode}: {joining.log_path.read_text()[-3000:]}"
            )
        if time.monotonic() > deadline:
            raise RuntimeError(
                f"the worker node did not join in {JOIN_TIMEOUT_S} s: {joining.log_path.read_text()[-3000:]}"
            )
        time.sleep(2)


def _wait_for_job_api(head: Node, address: str) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while subprocess.run(["ray", "job", "list", "--address", address], env=ray_client_env(),
                         capture_output=True, check=False).returncode != 0:  # fmt: skip
        if head.process.poll() is not None:
            raise RuntimeError(f"ray start exited with {head.process.returncode}: {head.log_path.read_text()[-3000:]}")
        if time.monotonic() > deadline:
            raise RuntimeError(
                f"the Ray head did not serve the job API at {address} in {START_TIMEOUT_S} s: "
                f"{head.log_path.read_text()[-3000:]}"
            )
        time.sleep(2)


def _stop(node: Node) -> None:
    """SIGTERM to `--block`, which stops the node's processes; whatever is left after GRACE_S is killed."""
    processes = node.processes()
    node.process.terminate()
    try:
        node.process.wait(timeout=GRACE_S)
    except subprocess.TimeoutExpired:
        pass
    for process in processes + node.processes():
        with contextlib.suppress(psutil.Error):
            process.kill()
    with contextlib.suppress(subprocess.TimeoutExpired):
        node.process.wait(timeout=30)
