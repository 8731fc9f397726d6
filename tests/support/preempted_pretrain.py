"""Run by test_pretrain_preemption.py in a fresh process: a node preempted mid-run on 2 simulated nodes.

What a spot reclaim does, in order, as Ray's autoscaler would: once both workers have finished
step HOLD_STEP (the debug hook holds them there), a replacement node joins, the worker node is
drained with reason PREEMPTION and a deadline DRAIN_DEADLINE_S away, and, after the deadline, the
node is removed. The workers get Ray Train's preemption notice, write a checkpoint at once and
hold still; at the deadline Ray Train restarts them on the head and the replacement, charged to
--max-preemptions (1) and not --max-failures (0), and the run resumes from that checkpoint.

Usage: python preempted_pretrain.py SHARDS_DIR WORK_DIR  (prints the PretrainResult as JSON)
The test sets AUDIOSCALE_TEST_WAIT_FOR_PREEMPTION_AT_STEP=HOLD_STEP and AUDIOSCALE_TEST_PREEMPTION_DIR.
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
import threading
import time
import traceback
from pathlib import Path

import ray
from ray.cluster_utils import Cluster
from ray.core.generated import autoscaler_pb2

from pipeline.checkpoint import CheckpointError, verify_checkpoint
from pipeline.pretrain.driver import PretrainConfig, run_pretraining

STORE_BYTES = 256 * 1024**2
HOLD_STEP = 5
STEPS = 8
DRAIN_DEADLINE_S = 15.0  # the notice's lead: GCE gives spot VMs 30 s, EC2 2 min; shorter keeps the test short
WAIT_S = 300.0


def _wait_for(what: str, condition) -> None:
    deadline = time.monotonic() + WAIT_S
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"waited {WAIT_S} s for {what}")
        time.sleep(0.5)


def _checkpoint_verifies(directory: Path) -> bool:
    try:
        verify_checkpoint(directory)
    except CheckpointError:
        return False
    return True


def start_replacement_node(address: str) -> subprocess.Popen:
    """A node joining as the autoscaler's replacement would: `ray start` (Cluster.add_node sets a
    SIGTERM handler, which works only in the main thread, and the main thread is running the fit)."""
    ray_cli = Path(sys.executable).parent / "ray"
    return subprocess.Popen(
        [str(ray_cli), "start", f"--address={address}", "--num-cpus=2", f"--object-store-memory={STORE_BYTES}",
         "--block", "--disable-usage-stats"],
        env={**os.environ, "RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S": "0"},  # stop at once when the test ends
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip


def preempt_worker_node(cluster: Cluster, worker_node, hold_dir: Path, run_dir: Path, log: dict) -> None:
    """The reclaim, from a thread beside the run; what it did goes into `log` (printed at the end)."""
    try:
        held = [hold_dir / f"held-{rank}.txt" for rank in (0, 1)]
        _wait_for(f"both workers to hold at step {HOLD_STEP}", lambda: all(path.is_file() for path in held))
        nodes = [path.read_text() for path in held]
        log["worker_nodes"] = nodes
        if worker_node.node_id not in nodes:
            raise RuntimeError(f"no worker on the non-head node {worker_node.node_id}: {nodes}")
        log["replacement"] = start_replacement_node(cluster.address)
        deadline_ms = int((time.time() + DRAIN_DEADLINE_S) * 1000)
        accepted, why = ray._raylet.GcsClient(address=cluster.gcs_address).drain_node(
            worker_node.node_id, autoscaler_pb2.DrainNodeReason.Value("DRAIN_NODE_REASON_PREEMPTION"),
            "test: spot reclaim", deadline_ms,
        )  # fmt: skip
        if not accepted:
            raise RuntimeError(f"drain refused: {why}")
        log["drained"] = worker_node.node_id
        checkpoint = run_dir / f"checkpoint_step_{HOLD_STEP:08d}"
        _wait_for(f"{checkpoint} to verify", lambda: _checkpoint_verifies(checkpoint))
        log["preemption_checkpoint_before_deadline"] = time.time() * 1000 < deadline_ms
        # Ray Core (GcsNodeManager::InferDeathInfo) counts a node lost after its PREEMPTION drain's
        # deadline as preempted (NodeDeathInfo AUTOSCALER_DRAIN_PREEMPTED); before it, as unexpected.
        time.sleep(max(0.0, deadline_ms / 1000 - time.time()) + 1.0)
        cluster.remove_node(worker_node)
        log["removed"] = True
    except Exception:
        log["error"] = traceback.format_exc()


def main(shards_dir: str, work_dir: str) -> None:
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))  # a test timeout still shuts the nodes down
    os.environ["RAY_TRAIN_PREEMPTION_POLL_INTERVAL_S"] = "1"  # read by the Ray Train controller (default 5 s)
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 2, "object_store_memory": STORE_BYTES})
    worker_node = cluster.add_node(num_cpus=2, object_store_memory=STORE_BYTES)
    storage, hold_dir = Path(work_dir) / "ray_results", Path(os.environ["AUDIOSCALE_TEST_PREEMPTION_DIR"])
    log: dict = {}
    reclaim = threading.Thread(
        target=preempt_worker_node,
        args=(cluster, worker_node, hold_dir, storage / "preempted", log),
        daemon=True,
    )
    try:
        ray.init(address=cluster.address, log_to_driver=False)
        reclaim.start()
        result = run_pretraining(
            PretrainConfig.from_flat(
                model_name="audiomae++-debug", model_overrides={"crop_frames": 100}, shards_dir=shards_dir,
                steps=STEPS, global_batch_size=8, num_workers=2, cpus_per_worker=1.0,
                placement_strategy="STRICT_SPREAD",  # one worker on the node to preempt, one on the head
                base_lr=0.1, log_every_steps=1, checkpoint_every_steps=4, rankme_every_steps=0, run_name="preempted",
                storage_path=str(storage), tracking_uri=f"sqlite:///{Path(work_dir) / 'mlflow.db'}",
                max_failures=0, max_preemption_failures=1,
            )
        )  # fmt: skip
        reclaim.join(timeout=60)
        print("RESULT " + json.dumps(dataclasses.asdict(result)))
    finally:
        replacement = log.pop("replacement", None)
        print("RECLAIM " + json.dumps(log))
        ray.shutdown()
        if replacement is not None:
            replacement.terminate()
            replacement.wait(timeout=60)
        cluster.shutdown()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
