"""Prep as a Ray job on the rehearsal's two nodes, with the raw audio only in the bucket: once as audio
files under a prefix, once as WebDataset `.tar` shards of them (as Dasheng's `wavlist_to_tar` writes
them). Each job's shards, written into the bucket by tasks on both nodes, must hold the rows, in the
same order, and the statistics of a one-node local prep of the same audio: for the audio files, the
rehearsal's first stage (the same command on the local Ray, from the local folder); for the tars, a local
prep of the same tars.
"""

from __future__ import annotations

import io
import subprocess
import sys
import tarfile
import time
from pathlib import Path

from cluster.rehearsal.commands import REPO_ROOT
from cluster.rehearsal.ray_nodes import TwoNodes, job_client
from cluster.rehearsal.stages import Rehearsal, expect

AUDIO_PREFIX, TARS_PREFIX = "raw/audio", "raw/tars"
SHARD_PREFIXES = {"audio": "shards/two-nodes-audio", "tars": "shards/two-nodes-tars"}
COMPARED = ("num_inputs", "num_rows", "total_hours", "mean", "std", "rejected_by_kind", "skipped_non_audio_files")
PREP_TIMEOUT_S = 900


def prep_argv(input_path: str, output: str) -> list[str]:
    return ["python", "-m", "pipeline.prep", "--input", input_path, "--output", output, "--preset", "audiomae",
            "--segment-s", "3", "--no-progress"]  # fmt: skip


def _tar_shards(audio: Path, folder: Path, shards: int = 2) -> Path:
    """The audio files as `shards` WebDataset tars: KEY.wav and KEY.json ({"split": "train"}) per file."""
    folder.mkdir(parents=True, exist_ok=True)
    files = sorted(audio.glob("*.wav"))
    for index in range(shards):
        with tarfile.open(folder / f"audio_{index:07d}.tar", "w") as shard:
            for path in files[index::shards]:
                shard.add(path, arcname=path.name)
                meta = b'{"split": "train"}'
                info = tarfile.TarInfo(f"{path.stem}.json")
                info.size = len(meta)
                shard.addfile(info, io.BytesIO(meta))
    return folder


def _upload(rehearsal: Rehearsal, folder: Path, prefix: str) -> None:
    client = rehearsal.store.client()
    for path in sorted(folder.iterdir()):
        client.upload_file(str(path), rehearsal.store.bucket, f"{prefix}/{path.name}")


def _job(nodes: TwoNodes, name: str, argv: list[str], node_env: dict[str, str]) -> str:
    """Submit `argv` as a Ray job, wait for its end; its log."""
    submit = ["ray", "job", "submit", "--address", nodes.job_api, "--submission-id", name, "--no-wait",
              "--working-dir", str(REPO_ROOT), "--runtime-env-json", '{"excludes": [".git", ".venv", "*.pyc"]}',
              "--", *argv]  # fmt: skip
    submitted = subprocess.run(submit, env=node_env, capture_output=True, text=True, timeout=300, check=False)
    expect(submitted.returncode == 0, f"ray job submit failed: {submitted.stdout[-2000:]}{submitted.stderr[-2000:]}")
    client, deadline = job_client(nodes), time.monotonic() + PREP_TIMEOUT_S
    while (status := str(client.get_job_status(name).value)) in ("RUNNING", "PENDING"):
        expect(time.monotonic() < deadline, f"the prep job {name} is still {status} after {PREP_TIMEOUT_S} s")
        time.sleep(2)
    log = client.get_job_logs(name)
    expect(status == "SUCCEEDED", f"the prep job {name} ended {status}:\n{log[-3000:]}")
    return log


def _local_prep(input_path: Path, output: Path, env: dict[str, str]) -> None:
    argv = [sys.executable, *prep_argv(str(input_path), str(output))[1:]]
    done = subprocess.run(argv, env=env, cwd=REPO_ROOT, capture_output=True, text=True, timeout=PREP_TIMEOUT_S)
    expect(done.returncode == 0, f"the local prep of {input_path} failed:\n{done.stdout[-1500:]}{done.stderr[-1500:]}")


def prep_on_two_nodes(rehearsal: Rehearsal, nodes: TwoNodes, node_env: dict[str, str]) -> dict:
    """Both prep jobs, each checked against a local prep of the same audio; the facts for the summary."""
    from pipeline.shards.format import read_manifest, read_shard_table

    work = rehearsal.work / "prep-jobs"
    tars = _tar_shards(rehearsal.audio_dir, work / "tars")
    _upload(rehearsal, rehearsal.audio_dir, AUDIO_PREFIX)
    _upload(rehearsal, tars, TARS_PREFIX)
    facts, started = {}, time.monotonic()
    one_node = {"audio": rehearsal.shards_uri, "tars": str(work / "local-tars")}
    for kind, prefix in (("audio", AUDIO_PREFIX), ("tars", TARS_PREFIX)):
        output = rehearsal.store.uri(SHARD_PREFIXES[kind])
        _job(nodes, f"prep-{kind}", prep_argv(rehearsal.store.uri(prefix), output), node_env)
        if kind == "tars":
            _local_prep(tars, Path(one_node[kind]), rehearsal.env())
        remote, local = read_manifest(output), read_manifest(one_node[kind])
        for key in COMPARED:
            expect(remote[key] == local[key], f"prep of the {kind} on two nodes: {key} differs from the local prep's")
        expect(read_shard_table(output).equals(read_shard_table(one_node[kind])),
               f"prep of the {kind} on two nodes: its rows differ from the local prep's")  # fmt: skip
        facts[f"prep_{kind}"] = (
            f"{remote['num_inputs']} inputs, {remote['num_rows']} rows, {len(remote['part_files'])} parts"
        )
    facts["prep_seconds"] = time.monotonic() - started
    return facts
