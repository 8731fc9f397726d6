"""The rehearsal's order: start the servers, make the audio, run each stage, keep going past a failed
stage where the next does not need it, and report. Progress lines name each stage as it starts and
ends, with its time, so a person watching knows what is running and how far it is.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import shutil
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from cluster.rehearsal import faults, stages, study_job
from cluster.rehearsal.audio import write_pitch_task, write_pretraining_audio
from cluster.rehearsal.object_store import running_object_store
from cluster.rehearsal.ray_nodes import CLUSTER_TOKEN
from cluster.rehearsal.tracking_server import running_tracking_server

# (name, what it exercises, the stage, the stages it needs)
STAGES: list[tuple[str, str, Callable[[stages.Rehearsal], dict], tuple[str, ...]]] = [
    ("prep", "prep writes shards, manifest and rejected.jsonl into the bucket", stages.prep_into_bucket, ()),
    ("exact resume", "2 workers train from and checkpoint into the bucket; killed, they resume exactly",
     stages.pretrain_and_resume_exactly, ("prep",)),
    ("truncated checkpoint", "a resume skips a half-uploaded newest checkpoint in the bucket",
     stages.resume_past_a_truncated_checkpoint, ("exact resume",)),
    ("evaluate", "a bucket checkpoint is scored; results go back beside it and to MLflow",
     stages.evaluate_from_bucket, ("exact resume",)),
    ("artifacts", "MLflow artifacts reach the bucket through the tracking server",
     stages.artifacts_in_bucket, ("exact resume",)),
    ("cut mid-upload", "the store goes away while a checkpoint is copied, until the run waits for it: an "
     "incomplete checkpoint never offered; resumed, the same final loss, 2 checkpoints kept",
     faults.store_cut_mid_upload, ("exact resume",)),
    ("faults", "wrong key, missing bucket, endpoint down, read-only policy: one line each",
     faults.bucket_faults, ()),
    ("two-node jobs", "two Ray nodes with token auth (listeners audited): prep of bucket audio and of tar shards "
     "equal to a local prep; a study, all storage remote, its worker node killed mid-trial",
     study_job.study_on_two_nodes, ("prep",)),
]  # fmt: skip


@dataclasses.dataclass
class Report:
    results: dict[str, dict] = dataclasses.field(default_factory=dict)  # stage -> its facts
    failures: dict[str, str] = dataclasses.field(default_factory=dict)  # stage -> why

    @property
    def ok(self) -> bool:
        return not self.failures


@contextlib.contextmanager
def servers(work: Path) -> Iterator[stages.Rehearsal]:
    """The store, the tracking server (basic-auth, artifacts in the bucket), the audio and the task."""
    # A new store starts empty, so its run database and users start anew too (the admin password of
    # basic-auth is read only when its user database is created).
    for folder in ("logs", "tracking", "crops"):
        shutil.rmtree(work / folder, ignore_errors=True)
        (work / folder).mkdir(parents=True)
    with running_object_store(work / "logs") as store:
        artifacts = f"s3://{store.bucket}/{stages.ARTIFACTS_PATH}"
        with running_tracking_server(work / "tracking", artifacts=artifacts, store_env=store.env(),
                                     basic_auth=True) as server:  # fmt: skip
            yield stages.Rehearsal(
                work=work, store=store, server=server,
                audio_dir=write_pretraining_audio(work / "audio"), tasks_dir=write_pitch_task(work / "tasks"),
            )  # fmt: skip


def run_rehearsal(work: Path, *, only: tuple[str, ...] = (), say: Callable[[str], None] = print) -> Report:
    """Run every stage (or those named in `only`, with what they need) and return what each found."""
    report = Report()
    wanted = _with_needs(only) if only else [name for name, *_ in STAGES]
    say(f"[rehearsal] starting the object store and the tracking server in {work}")
    with ray_token_auth(), servers(work) as rehearsal:
        say(f"[rehearsal] store {rehearsal.store.endpoint}, bucket {rehearsal.store.bucket}; "
            f"MLflow {rehearsal.server.uri} (basic-auth)")  # fmt: skip
        todo = [stage for stage in STAGES if stage[0] in wanted]
        for index, (name, what, stage, needs) in enumerate(todo, start=1):
            failed_needs = [need for need in needs if need in report.failures]
            if failed_needs:
                report.failures[name] = f"not run: {', '.join(failed_needs)} failed"
                say(f"[rehearsal] {index}/{len(todo)} {name}: skipped ({report.failures[name]})")
                continue
            say(f"[rehearsal] {index}/{len(todo)} {name}: {what} ...")
            started = time.monotonic()
            try:
                report.results[name] = stage(rehearsal)
            except (AssertionError, RuntimeError) as error:
                report.failures[name] = str(error)
                say(f"[rehearsal] {index}/{len(todo)} {name}: FAILED after {time.monotonic() - started:.0f} s: {error}")
                continue
            say(f"[rehearsal] {index}/{len(todo)} {name}: ok in {time.monotonic() - started:.0f} s")
    return report


@contextlib.contextmanager
def ray_token_auth() -> Iterator[None]:
    """Token authentication for every Ray client of this process too (the job status checks), as for the
    nodes and the commands the rehearsal starts; the environment as it was afterwards."""
    saved = {name: os.environ.get(name) for name in ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN")}
    os.environ.update(RAY_AUTH_MODE="token", RAY_AUTH_TOKEN=CLUSTER_TOKEN)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def _with_needs(names: tuple[str, ...]) -> list[str]:
    needs = {name: stage_needs for name, _, _, stage_needs in STAGES}
    wanted: set[str] = set()
    pending = list(names)
    while pending:
        name = pending.pop()
        if name not in needs:
            raise ValueError(f"no rehearsal stage {name!r}; stages: {', '.join(needs)}")
        if name not in wanted:
            wanted.add(name)
            pending.extend(needs[name])
    return [name for name, *_ in STAGES if name in wanted]


def format_report(report: Report) -> str:
    """What each stage exercised and found, then the failures: the rehearsal's closing lines."""
    lines = ["[rehearsal] summary:"]
    for name, what, _, _ in STAGES:
        if name in report.results:
            facts = report.results[name]
            shown = "; ".join(
                f"{key} {value:.1f}" if isinstance(value, float) else f"{key} {value}"
                for key, value in facts.items()
                if key not in ("command", "commands")
            )
            lines.append(f"  ok      {name}: {what}\n          {shown}")
        elif name in report.failures:
            lines.append(f"  FAILED  {name}: {report.failures[name].splitlines()[0][:300]}")
    return "\n".join(lines)
