"""Ray Train's PyTorch backend for a run on this machine alone, with nothing listening beyond loopback.

Ray Train joins its workers into a torch.distributed process group through a TCP store that rank 0
serves. Whatever address the workers are given, torch's store listens on every interface (it binds
the wildcard address), so a local run exposed an unauthenticated port to the network while every
Ray server listens on 127.0.0.1 (pipeline.session.ray_session). For a local run the group meets through a
file instead (torch's FileStore: `init_method="file://..."`, no socket at all), and gloo's own
connections between workers use the loopback device (`GLOO_SOCKET_IFNAME=lo`; NCCL's bootstrap
likewise, `NCCL_SOCKET_IFNAME=lo`). That holds whenever every worker of the group is on one machine
(asked of the workers at each start); a group spread over several machines keeps Ray's TCP store. Built on Ray 2.60's `_TorchBackend` (pinned in requirements.txt).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import ray
from ray.train.torch.config import (
    TorchConfig,
    _set_torch_distributed_env_vars,
    _setup_torch_process_group,
    _TorchBackend,
)

LOOPBACK_DEVICE = "lo"


def _node_id() -> str:
    return ray.get_runtime_context().get_node_id()


def _use_loopback_sockets() -> None:
    os.environ["GLOO_SOCKET_IFNAME"] = LOOPBACK_DEVICE
    os.environ["NCCL_SOCKET_IFNAME"] = LOOPBACK_DEVICE


class _LoopbackTorchBackend(_TorchBackend):
    def on_start(self, worker_group, backend_config: TorchConfig) -> None:
        if len(set(worker_group.execute(_node_id))) > 1:  # workers on several machines: Ray's TCP store
            super().on_start(worker_group, backend_config)
            return
        # A fresh file per start: a restarted worker group (a retry) must not meet an old group's keys.
        handle, path = tempfile.mkstemp(prefix="audioscale-process-group-")
        os.close(handle)
        os.unlink(path)  # FileStore creates it; the workers share this machine's /tmp
        self._store_file = path
        worker_group.execute(_use_loopback_sockets)
        worker_group.execute(_set_torch_distributed_env_vars)
        ray.get([
            worker_group.execute_single_async(
                rank, _setup_torch_process_group, backend=backend_config.backend, world_rank=rank,
                world_size=len(worker_group), init_method=f"file://{path}", timeout_s=backend_config.timeout_s,
            )
            for rank in range(len(worker_group))
        ])  # fmt: skip

    def on_shutdown(self, worker_group, backend_config) -> None:
        super().on_shutdown(worker_group, backend_config)
        store_file = getattr(self, "_store_file", None)  # none when the workers spanned machines
        if store_file:
            Path(store_file).unlink(missing_ok=True)


class LoopbackTorchConfig(TorchConfig):
    """TorchConfig whose process group meets through a file and loopback sockets when all its workers
    share one machine, and as Ray's own does otherwise."""

    @property
    def backend_cls(self):
        return _LoopbackTorchBackend
