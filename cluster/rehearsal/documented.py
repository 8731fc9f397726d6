"""The rehearsal's command lines as cluster/README.md shows them: the same argv the stages run,
rendered with the README's placeholders (the store on port 9000, the bucket audioscale-data, the
tracking server on port 5000, DIR for the generated folders). A test checks that each
line is in the README, so the README's steps are exactly what the rehearsal runs.
"""

from __future__ import annotations

import shlex
from pathlib import Path

from cluster.rehearsal import prep_jobs, stages, study_job
from cluster.rehearsal.object_store import Credentials, ObjectStore
from cluster.rehearsal.tracking_server import TrackingServer, server_argv

DOCUMENTED_PORT = 9000


def documented_rehearsal() -> stages.Rehearsal:
    return stages.Rehearsal(
        work=Path("DIR"),
        store=ObjectStore(port=DOCUMENTED_PORT, admin=Credentials("KEY", "SECRET"), bucket="audioscale-data"),
        server=TrackingServer(uri="http://127.0.0.1:5000", password=None),
        audio_dir=Path("DIR"),
        tasks_dir=Path("DIR"),
    )


def documented_commands() -> list[str]:
    """Each stage's command line, as a user types it."""
    rehearsal = documented_rehearsal()
    checkpoint = rehearsal.store.uri(f"{stages.RUNS_PATH}/uninterrupted/checkpoint_step_{stages.STEPS:08d}")
    argvs = [
        ["python", "-m", "cluster.rehearsal.object_store", "--bucket", rehearsal.store.bucket, "--port", "9000"],
        server_argv(
            Path("DIR"),
            port=5000,
            artifacts=f"s3://{rehearsal.store.bucket}/{stages.ARTIFACTS_PATH}",
            basic_auth=True,
        ),
        stages.prep_argv(rehearsal),
        stages.pretrain_argv(rehearsal, "uninterrupted"),
        stages.evaluate_argv(rehearsal, checkpoint),
        prep_jobs.prep_argv(
            rehearsal.store.uri(prep_jobs.AUDIO_PREFIX), rehearsal.store.uri(prep_jobs.SHARD_PREFIXES["audio"])
        ),
        study_job.study_argv(rehearsal),
    ]
    return [shlex.join(argv) for argv in argvs]
