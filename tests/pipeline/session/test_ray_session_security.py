"""The local Ray that connect_ray starts listens on loopback only (auth is off: no outside access)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from tests.conftest import REPO_ROOT

LOOPBACK = {"127.0.0.1", "::1", "::ffff:127.0.0.1"}


# The local Ray that connect_ray starts, the way every stage does, with two Ray Train workers joined
# into a torch.distributed group by the pipeline's backend config (pipeline.pretrain.loopback_backend,
# what every pretraining run uses). Once the group is up and has all-reduced, rank 0 lists the
# listening sockets of every process of the session (GCS, raylet, agents, workers); the driver adds
# its own after the run.
TRAIN_SCRIPT = """
import json, os, sys, psutil, ray, torch, torch.distributed as dist
from ray.train import RunConfig, ScalingConfig
from ray.train.torch import TorchConfig, TorchTrainer
from pipeline.pretrain.loopback_backend import LoopbackTorchConfig
from pipeline.session.ray_session import connect_ray

def loop(config):
    total = torch.tensor([1.0])
    dist.all_reduce(total)
    if dist.get_rank() == 0:
        # The session's servers name its folder on their command line; the workers (this one
        # included) rename themselves "ray::...", so they are found as the raylet's descendants.
        servers = [p for p in psutil.process_iter(["cmdline"]) if config["session"] in " ".join(p.info["cmdline"] or [])]
        processes = {p.pid: p for p in servers}
        for server in servers:
            processes.update({child.pid: child for child in server.children(recursive=True)})
        listening = []
        for process in processes.values():
            try:
                name, sockets = process.name(), process.net_connections(kind="inet")
            except psutil.Error:
                continue
            listening += [[name, s.laddr.ip, s.laddr.port] for s in sockets if s.status == psutil.CONN_LISTEN]
        workers = sum(1 for p in processes.values() if p.name().startswith("ray::RayTrainWorker"))
        with open(config["out"], "w") as handle:
            json.dump({"world": float(total.item()), "listening": listening, "workers": workers}, handle)
    dist.barrier()

assert connect_ray(num_cpus=2)
session = ray._private.worker._global_node.get_session_dir_path()
out = os.path.join(os.environ["STORAGE"], "seen.json")
os.makedirs(os.environ["STORAGE"], exist_ok=True)
torch_config = {"loopback": LoopbackTorchConfig, "ray": TorchConfig}[sys.argv[1]]()
trainer = TorchTrainer(loop, train_loop_config={"session": session, "out": out}, torch_config=torch_config,
                       scaling_config=ScalingConfig(num_workers=2, resources_per_worker={"CPU": 0.5}),
                       run_config=RunConfig(storage_path=os.environ["STORAGE"], name="sockets"))
trainer.fit()
seen = json.load(open(out))
# The driver's own servers (its core worker), while the session still runs.
driver = psutil.Process().net_connections(kind="inet")
seen["listening"] += [["driver", s.laddr.ip, s.laddr.port] for s in driver if s.status == psutil.CONN_LISTEN]
ray.shutdown()
print(json.dumps(seen))
"""


def _listening_during_training(tmp_path, config_kind: str) -> dict:
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "STORAGE": str(tmp_path / config_kind)}
    env.pop("RAY_ADDRESS", None)
    completed = subprocess.run(
        [sys.executable, "-c", TRAIN_SCRIPT, config_kind],
        capture_output=True, text=True, timeout=300, env=env, cwd=REPO_ROOT,
    )  # fmt: skip
    assert completed.returncode == 0, completed.stderr[-3000:]
    return json.loads(completed.stdout.strip().splitlines()[-1])


def test_a_two_worker_training_group_listens_on_loopback_only(tmp_path):
    """torch.distributed's TCP store listened on every interface (`*:36267`, ray::RayTrainWorker)."""
    seen = _listening_during_training(tmp_path, "loopback")
    assert seen["world"] == 2.0  # the group is real: both ranks took part in the all-reduce
    names = {name for name, _, _ in seen["listening"]}
    assert {"gcs_server", "raylet"} <= names, seen["listening"]  # the check saw the session's processes
    assert seen["workers"] == 2  # and both training workers, where Ray's own store listened on `::`
    assert "driver" in names  # and the driver's
    exposed = [entry for entry in seen["listening"] if entry[1] not in LOOPBACK]
    assert not exposed, exposed
