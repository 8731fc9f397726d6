"""Prep given folders of this machine on a cluster of two nodes (two `ray start` nodes on this machine, the
worker node in a mount namespace where the data folder is an empty tmpfs: a second machine that shares no
disk). Folders the other node cannot see are read on the driver's node only, said once, every input
featurized; folders every node sees (a shared filesystem) are read anywhere, nothing said. Before, tasks
on the other node would have rejected their inputs as missing. Audio in a bucket, read by tasks on both
nodes as Ray jobs, is the cluster rehearsal's "two-node jobs" stage."""

from __future__ import annotations

import subprocess
import sys

import pytest

from cluster.rehearsal.ray_nodes import ray_client_env, running_two_nodes
from pipeline.shards.format import read_manifest
from tests.conftest import REPO_ROOT
from tests.support.prep_helpers import write_clips

FILES = 24  # 2 CPUs -> 8 batches of 3 files


def _prep_on(gcs: str, audio, output) -> str:
    argv = [sys.executable, "-m", "pipeline.prep", "--input", str(audio), "--output", str(output), "--segment-s", "2",
            "--no-progress", "--address", gcs]  # fmt: skip
    done = subprocess.run(argv, capture_output=True, text=True, timeout=600, cwd=REPO_ROOT,
                          env=ray_client_env(PYTHONPATH=str(REPO_ROOT)))  # fmt: skip
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    return done.stderr


@pytest.mark.slow
def test_folders_another_node_cannot_see_are_read_on_the_drivers_node_only(tmp_path):
    hidden, shared = tmp_path / "hidden", tmp_path / "shared"
    hidden.mkdir()
    for root in (hidden, shared):
        write_clips(root / "audio", FILES)
    with running_two_nodes(tmp_path, head_cpus=1, worker_cpus=1, hidden_from_worker=(hidden,)) as nodes:
        said = _prep_on(nodes.gcs, hidden / "audio", hidden / "shards")
        assert "--input and --output are folders on this machine that 1 of the cluster's 2 nodes cannot see" in said
        assert "every task runs on this node" in said
        seen_everywhere = _prep_on(nodes.gcs, shared / "audio", shared / "shards")
        assert "cannot see" not in seen_everywhere
    for root in (hidden, shared):
        manifest = read_manifest(root / "shards")
        assert manifest["num_inputs"] == FILES and manifest["num_rejected"] == 0  # every input read
    assert read_manifest(hidden / "shards")["part_files"] == read_manifest(shared / "shards")["part_files"]
