"""Run by test_prep_nodes.py in a fresh process: prep on 2 simulated nodes of 1 CPU each.

Usage: python multinode_prep.py INPUT OUTPUT  (prints the head's node id and each batch's node as JSON)

The batch records, which say which node read each batch, are kept past the manifest for the test.
"""

from __future__ import annotations

import json
import signal
import sys

import ray
from ray.cluster_utils import Cluster

from pipeline.prep import progress
from pipeline.prep.run import PrepConfig, run_prep
from pipeline.shards.location import locate_shards

STORE_BYTES = 256 * 1024**2


def main(input_path: str, output: str) -> None:
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))  # a test's timeout still shuts the nodes down
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "object_store_memory": STORE_BYTES})
    cluster.add_node(num_cpus=1, object_store_memory=STORE_BYTES)
    progress.clear_progress = lambda location: None  # keep the records for the test to read
    try:
        ray.init(address=cluster.address, log_to_driver=False)
        run_prep(PrepConfig(input_path=input_path, output_dir=output, segment_s=2.0, show_progress=False))
        nodes = {first: record["node"] for first, record in progress.finished_records(locate_shards(output)).items()}
        here = ray.get_runtime_context().get_node_id()
        print("RESULT " + json.dumps({"driver_node": here, "batch_nodes": nodes}))
    finally:
        ray.shutdown()
        cluster.shutdown()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
