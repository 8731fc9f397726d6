"""The rehearsal's stages: every stage of a cluster user's path run against the bucket and the
tracking server, each one a command line as cluster/README.md writes it, each followed by checks of
what it left in the bucket and in MLflow. A stage returns the facts the summary prints; a failed
check raises `RehearsalFailed` naming what was expected and what was found.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from cluster.rehearsal.commands import Outcome, Running, require_success, run_command, start_command
from cluster.rehearsal.object_store import ObjectStore
from cluster.rehearsal.ray_nodes import CLUSTER_TOKEN
from cluster.rehearsal.tracking_server import TrackingServer

# A debug-size model and a run short enough for 2 CPU cores: 8 steps, checkpoints at 3 and 6 (and 8).
STEPS, CHECKPOINT_EVERY, CRASH_AFTER = 8, 3, 5
SHARDS_PATH, RUNS_PATH, ARTIFACTS_PATH = "shards/rehearsal", "ray_results", "mlflow-artifacts"


class RehearsalFailed(AssertionError):
    pass


def expect(condition: bool, what: str) -> None:
    if not condition:
        raise RehearsalFailed(what)


@dataclasses.dataclass(frozen=True)
class Rehearsal:
    """Everything the stages share: the work folder (logs, the audio, the task), the servers."""

    work: Path
    store: ObjectStore
    server: TrackingServer
    audio_dir: Path
    tasks_dir: Path

    def env(self, **extra: str) -> dict[str, str]:
        """The variables a cluster node has: the store's credentials and endpoint, the tracking server's
        address and login, Ray's token authentication (one token for every Ray the rehearsal starts)."""
        ray_auth = {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": CLUSTER_TOKEN}
        return {**self.store.env(), **self.server.client_env(), **ray_auth, **extra}

    def run(self, name: str, argv: list[str], **extra_env: str) -> Outcome:
        return run_command(argv, env=self.env(**extra_env), log_dir=self.work / "logs", name=name)

    def start(self, name: str, argv: list[str], **extra_env: str) -> Running:
        return start_command(argv, env=self.env(**extra_env), log_dir=self.work / "logs", name=name)

    @property
    def shards_uri(self) -> str:
        return self.store.uri(SHARDS_PATH)

    @property
    def runs_uri(self) -> str:
        return self.store.uri(RUNS_PATH)


def prep_argv(rehearsal: Rehearsal) -> list[str]:
    return ["python", "-m", "pipeline.prep", "--input", str(rehearsal.audio_dir), "--output", rehearsal.shards_uri,
            "--preset", "audiomae", "--segment-s", "3", "--no-progress"]  # fmt: skip


def prep_into_bucket(rehearsal: Rehearsal) -> dict:
    outcome = require_success(rehearsal.run("prep", prep_argv(rehearsal)))
    keys = rehearsal.store.keys(SHARDS_PATH + "/")
    names = {key.rpartition("/")[2] for key in keys}
    expect("manifest.json" in names and "rejected.jsonl" in names, f"prep left no manifest/rejected.jsonl: {names}")
    manifest = json.loads(rehearsal.store.client().get_object(
        Bucket=rehearsal.store.bucket, Key=f"{SHARDS_PATH}/manifest.json")["Body"].read())  # fmt: skip
    parts = {record["name"]: record for record in manifest["part_files"]}
    expect(parts and set(parts) <= names, "the manifest's part files are not all in the bucket")
    expect(all(keys[f"{SHARDS_PATH}/{name}"] == record["bytes"] for name, record in parts.items()),
           "a part file's size in the bucket differs from its manifest record")  # fmt: skip
    expect(not any(key.startswith("s3:") for key in _local_names()), "prep wrote a local folder named s3:")
    return {
        "command": outcome.shell,
        "seconds": outcome.seconds,
        "part_files": len(parts),
        "rows": manifest["num_rows"],
    }


def _local_names() -> list[str]:
    return [path.name for path in Path.cwd().iterdir()]


def pretrain_argv(rehearsal: Rehearsal, run_name: str, steps: int = STEPS) -> list[str]:
    return ["python", "-m", "pipeline.pretrain", "--model", "audiomae++-debug", "--override", "crop_frames=100",
            "--shards", rehearsal.shards_uri, "--storage-path", rehearsal.runs_uri, "--run-name", run_name,
            "--steps", str(steps), "--batch-size", "4", "--micro-batch-size", "1", "--num-workers", "2",
            "--cpus-per-worker", "1", "--lr", "0.5", "--log-every", "4", "--checkpoint-every", str(CHECKPOINT_EVERY),
            "--rankme-every", "0", "--max-failures", "1", "--shuffle-buffer-crops", "5",
            "--system-metrics-every", "0", "--experiment", "rehearsal"]  # fmt: skip


def checkpoints_in_bucket(rehearsal: Rehearsal, run_name: str) -> dict[str, dict[str, int]]:
    """checkpoint folder key -> {file name: bytes} of a run's checkpoints in the bucket."""
    found: dict[str, dict[str, int]] = {}
    for key, size in rehearsal.store.keys(f"{RUNS_PATH}/{run_name}/").items():
        folder, _, name = key.rpartition("/")
        if folder.rpartition("/")[2].startswith("checkpoint_step_"):
            files = found.setdefault(folder, {})  # a folder marker alone ("…/checkpoint_step_N/") counts too
            if name:
                files[name] = size
    return found


def _records(folder: Path, rank: int) -> tuple[dict[int, list[str]], str]:
    """(step -> the crop hashes of its last attempt, the final weights' hash) of one rank."""
    crops: dict[int, list[str]] = {}
    previous = None
    for line in (folder / f"rank-{rank}.txt").read_text().split("\n"):
        if not line:
            continue
        step, digest = line.split()
        if int(step) != previous:
            crops[int(step)] = []
            previous = int(step)
        crops[int(step)].append(digest)
    return crops, (folder / f"weights-{rank}.txt").read_text()


def pretrain_and_resume_exactly(rehearsal: Rehearsal) -> dict:
    """An uninterrupted run, and a run whose rank 1 is killed after step 5 and resumes from its step-3
    checkpoint in the bucket: the same crops at every step and bit-identical final weights."""
    record = rehearsal.work / "crops"
    clean = require_success(rehearsal.run(
        "pretrain-uninterrupted", pretrain_argv(rehearsal, "uninterrupted"),
        AUDIOSCALE_TEST_RECORD_CROPS_DIR=str(record / "uninterrupted")))  # fmt: skip
    crashed = require_success(rehearsal.run(
        "pretrain-crashed", pretrain_argv(rehearsal, "crashed"),
        AUDIOSCALE_TEST_RECORD_CROPS_DIR=str(record / "crashed"), AUDIOSCALE_TEST_CRASH_AT_STEP=str(CRASH_AFTER),
        AUDIOSCALE_TEST_CRASH_RANK="1", AUDIOSCALE_TEST_CRASH_MARKER=str(record / "crashed.marker")))  # fmt: skip
    expect((record / "crashed.marker").is_file(), "the worker was not killed: the resume was not exercised")
    for rank in (0, 1):
        clean_crops, clean_weights = _records(record / "uninterrupted", rank)
        crashed_crops, crashed_weights = _records(record / "crashed", rank)
        expect(sorted(crashed_crops) == list(range(1, STEPS + 1)), f"rank {rank} trained steps {sorted(crashed_crops)}")
        expect(crashed_crops == clean_crops, f"rank {rank}: the resumed run trained on other crops")
        expect(crashed_weights == clean_weights, f"rank {rank}: the resumed run ended with other weights")
    checkpoints = checkpoints_in_bucket(rehearsal, "crashed")
    expect(len(checkpoints) >= 2, f"fewer than 2 checkpoints of the run in the bucket: {sorted(checkpoints)}")
    for folder, files in checkpoints.items():
        expect({"model.json", "model.safetensors", "train_state.pt"} <= set(files), f"{folder} holds {sorted(files)}")
        meta = read_json(rehearsal, f"{folder}/model.json")
        expect(set(meta.get("sha256", {})) >= {"model.safetensors", "train_state.pt"}, f"{folder}: no sha256 record")
    return {
        "commands": [clean.shell, crashed.shell],
        "seconds": clean.seconds + crashed.seconds,
        "checkpoints": sorted(folder.rpartition("/")[2] for folder in checkpoints),
        "final_loss": clean.last_line("final loss"),
    }


def read_json(rehearsal: Rehearsal, key: str) -> dict:
    return json.loads(rehearsal.store.client().get_object(Bucket=rehearsal.store.bucket, Key=key)["Body"].read())


def resume_past_a_truncated_checkpoint(rehearsal: Rehearsal) -> dict:
    """The newest checkpoint of the crashed run cut to half its bytes in the bucket (an upload cut
    short): extending the run skips it, says so before the workers start, and resumes from the one
    before it."""
    checkpoints = checkpoints_in_bucket(rehearsal, "crashed")
    newest, previous = sorted(checkpoints, key=lambda folder: folder.rpartition("/")[2])[-2:][::-1]
    client, bucket = rehearsal.store.client(), rehearsal.store.bucket
    weights = client.get_object(Bucket=bucket, Key=f"{newest}/model.safetensors")["Body"].read()
    client.put_object(Bucket=bucket, Key=f"{newest}/model.safetensors", Body=weights[: len(weights) // 2])
    outcome = require_success(rehearsal.run("pretrain-truncated", pretrain_argv(rehearsal, "crashed", STEPS + 2)))
    skipped = outcome.last_line("resume: skipping checkpoint")
    expect(newest.rpartition("/")[2] in skipped and "damaged" in skipped, f"no skip of {newest} said: {skipped!r}")
    expect(previous.rpartition("/")[2] in outcome.last_line("resume: resuming from"), "the fallback was not named")
    expect(f"{STEPS + 2} steps" in outcome.last_line("final loss"), outcome.last_line("final loss"))
    return {"command": outcome.shell, "seconds": outcome.seconds, "skipped": newest, "resumed_from": previous}


def newest_checkpoint_uri(rehearsal: Rehearsal, run_name: str) -> str:
    newest = max(checkpoints_in_bucket(rehearsal, run_name), key=lambda folder: folder.rpartition("/")[2])
    return rehearsal.store.uri(newest)


def evaluate_argv(rehearsal: Rehearsal, checkpoint: str) -> list[str]:
    return ["python", "-m", "pipeline.evaluate", "--checkpoint", checkpoint, "--tasks-dir", str(rehearsal.tasks_dir),
            "--probe", "knn", "--seeds", "2", "--workers", "1", "--rankme-n", "64"]  # fmt: skip


def evaluate_from_bucket(rehearsal: Rehearsal) -> dict:
    checkpoint = newest_checkpoint_uri(rehearsal, "uninterrupted")
    outcome = require_success(rehearsal.run("evaluate", evaluate_argv(rehearsal, checkpoint)))
    folder = checkpoint.partition("?")[0].removeprefix(f"s3://{rehearsal.store.bucket}/")
    result = read_json(rehearsal, f"{folder}/evaluation/evaluation.json")
    expect(result["checkpoint_dir"].startswith("s3://"), f"evaluation names {result['checkpoint_dir']}")
    expect("MLflow run:" in outcome.output, "evaluate logged no MLflow run")
    return {"command": outcome.shell, "seconds": outcome.seconds, "Q": result["q"], "R": result["rankme"]}


def artifacts_in_bucket(rehearsal: Rehearsal) -> dict:
    """The runs' MLflow artifacts went through the server into the bucket, none to a local folder."""
    keys = rehearsal.store.keys(ARTIFACTS_PATH + "/")
    expect(len(keys) > 0, "no MLflow artifact reached the bucket")
    expect(not (rehearsal.work / "tracking" / "artifacts").exists(), "the server wrote artifacts to a local folder")
    return {"artifact_objects": len(keys), "artifact_bytes": sum(keys.values())}
