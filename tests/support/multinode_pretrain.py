"""Run by test_pretrain_cluster.py in a fresh process: pretraining on 2 simulated nodes.

Each node has 2 logical CPUs: one for its training worker and one for Ray Data, whose
file-listing and Parquet-reading tasks each need a whole CPU on one node (with 1 CPU per node
and a worker on each, those tasks can never be scheduled).

Usage: python multinode_pretrain.py SHARDS_DIR WORK_DIR  (prints the PretrainResult as JSON)
"""

from __future__ import annotations

import dataclasses
import json
import signal
import sys
from pathlib import Path

import ray
from ray.cluster_utils import Cluster

from pipeline.pretrain.driver import PretrainConfig, run_pretraining

STORE_BYTES = 256 * 1024**2


def main(shards_dir: str, work_dir: str) -> None:
    # A SIGTERM from the test's timeout must still shut the simulated nodes down.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 2, "object_store_memory": STORE_BYTES})
    cluster.add_node(num_cpus=2, object_store_memory=STORE_BYTES)
    try:
        ray.init(address=cluster.address, log_to_driver=False)
        result = run_pretraining(
            PretrainConfig.from_flat(
                model_name="audiomae++-debug",
                model_overrides={"crop_frames": 100},
                shards_dir=shards_dir,
                steps=4,
                global_batch_size=8,
                num_workers=2,
                cpus_per_worker=1.0,
                placement_strategy="SPREAD",
                base_lr=0.1,
                log_every_steps=2,
                checkpoint_every_steps=4,
                rankme_every_steps=0,
                run_name="two-nodes",
                storage_path=str(Path(work_dir) / "ray_results"),
                tracking_uri=f"sqlite:///{Path(work_dir) / 'mlflow.db'}",
                max_failures=0,
            )
        )
        print("RESULT " + json.dumps(dataclasses.asdict(result)))
    finally:
        ray.shutdown()
        cluster.shutdown()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
