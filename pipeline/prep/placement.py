"""Where prep's batch tasks may run: anywhere in the cluster when the audio and the output are in a bucket,
or in folders every node sees (a shared filesystem, a copy in each node's image); on the driver's node
only when some node cannot see them. Which nodes see a folder is asked of the nodes themselves: a task
with no CPU, pinned to each, looks for the first and last input file (with their sizes) and the output
folder. The rule, said once when it applies, beats the alternative: tasks on a node without the folder
rejecting their inputs as missing, half the audio lost.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from pipeline.audio.input_file import InputFile
from pipeline.storage.uri import is_uri


def task_placement(output_dir: str | Path, readable: list[InputFile]) -> dict:
    """Ray's scheduling for the batch tasks: anywhere in the cluster, unless the audio or the output is a
    folder of this machine that some other node cannot see (no shared filesystem, no copy in its image).
    Then every task runs here, and prep says so, rather than tasks on those nodes failing to find the files."""
    local_inputs = [item for item in readable if not is_uri(item.path)]
    samples = {item.path: item.size_bytes for item in (local_inputs[:1] + local_inputs[-1:])}
    folders = [str(output_dir)] if not is_uri(output_dir) else []
    nodes = [node["NodeID"] for node in ray.nodes() if node.get("Alive")]
    if not (samples or folders) or len(nodes) < 2:
        return {}
    blind = _nodes_not_seeing(nodes, samples, folders)
    if not blind:
        return {}  # a filesystem every node shares: the tasks may run anywhere
    here = ray.get_runtime_context().get_node_id()
    local = " and ".join(what for what, named in (("--input", samples), ("--output", folders)) if named)
    print(
        f"prep: {local} {'is a folder' if ' and ' not in local else 'are folders'} on this machine that "
        f"{len(blind)} of the cluster's {len(nodes)} nodes cannot see: every task runs on this node ({here[:12]}); "
        "put the audio and the shards in a bucket (s3://...) to use the others",
        file=sys.stderr,
    )
    return {"scheduling_strategy": NodeAffinitySchedulingStrategy(node_id=here, soft=False)}


def _sees(files: dict[str, int], folders: list[str]) -> bool:
    """On the node this runs on: are these files there with these sizes, and these folders?"""
    return all(os.path.isfile(path) and os.path.getsize(path) == size for path, size in files.items()) and all(
        os.path.isdir(folder) for folder in folders
    )


def _nodes_not_seeing(nodes: list[str], files: dict[str, int], folders: list[str]) -> list[str]:
    """The nodes on which `_sees` is false, or that do not answer within a minute (no CPU asked for)."""
    probe = ray.remote(num_cpus=0)(_sees)
    answers = {
        node: probe.options(scheduling_strategy=NodeAffinitySchedulingStrategy(node_id=node, soft=False)).remote(
            files, folders
        )
        for node in nodes
    }
    blind = []
    for node, answer in answers.items():
        try:
            if not ray.get(answer, timeout=60):
                blind.append(node)
        except (ray.exceptions.GetTimeoutError, ray.exceptions.RayError):
            blind.append(node)
    return blind
