"""Prep on a cluster of two nodes (simulated on this machine): a folder of the driver's machine is read on
the driver's node only, said once, rather than half read by nodes that cannot see it. Audio in a bucket,
read by tasks on both nodes as Ray jobs, is the cluster rehearsal's "two-node jobs" stage."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from pipeline.shards.format import read_manifest
from tests.conftest import REPO_ROOT
from tests.support.prep_helpers import write_clips

FILES = 24  # 2 CPUs -> 8 batches of 3 files


def _prep_on_two_nodes(audio: str, output: str) -> tuple[dict, str]:
    argv = [sys.executable, str(REPO_ROOT / "tests" / "support" / "multinode_prep.py"), audio, output]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=600, cwd=REPO_ROOT,
                          env={**os.environ, "PYTHONPATH": str(REPO_ROOT)})  # fmt: skip
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    result = next(line for line in done.stdout.splitlines() if line.startswith("RESULT "))
    return json.loads(result.removeprefix("RESULT ")), done.stderr


@pytest.mark.slow
def test_a_local_folder_on_a_two_node_cluster_is_read_on_the_drivers_node_only(tmp_path):
    """The other node cannot see this machine's folders: every batch runs where the driver is, said once,
    never half the inputs read and half lost."""
    audio = write_clips(tmp_path / "audio", FILES)
    result, said = _prep_on_two_nodes(str(audio), str(tmp_path / "shards"))
    assert "every task runs on this node" in said and "put the audio and the shards in a bucket" in said
    assert len(result["batch_nodes"]) == 8 and set(result["batch_nodes"].values()) == {result["driver_node"]}
    assert read_manifest(tmp_path / "shards")["num_inputs"] == FILES
