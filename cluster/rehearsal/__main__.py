"""`python -m cluster.rehearsal`: the cluster path on this machine, against real servers on loopback.

Starts an S3-compatible store (`cluster.rehearsal.object_store`) and an `mlflow server` whose
artifacts go to the store's bucket behind MLflow's basic-auth app, then runs each stage of
cluster/README.md with every input and output remote: prep into the bucket, pretraining with 2
workers from and into the bucket (killed mid-run and resumed exactly), a resume past a truncated
checkpoint, evaluation of a bucket checkpoint, the store going away mid-upload, the faults a
bucket brings before any work, and a study submitted as Ray jobs to two Ray nodes (stopped and
resubmitted with --resume, its worker node killed mid-trial). It prints a line per stage as it goes
and a summary at the end; exit code 0 when every check held.
"""

from __future__ import annotations

import dataclasses
import signal
import sys
import tempfile
import time
from pathlib import Path

from cluster.rehearsal.plan import STAGES, format_report, run_rehearsal
from pipeline.cli.command import Command
from pipeline.cli.flags import flag

COMMAND = Command("cluster.rehearsal", __doc__.split("\n")[0])


@dataclasses.dataclass(frozen=True, kw_only=True)
class RehearsalFlags:
    work: str | None = flag("--work", None, "folder for logs, audio and the run database (default: a temporary one)")
    only: tuple[str, ...] = flag(
        "--only", (), f"run these stages (and those they need): {', '.join(repr(name) for name, *_ in STAGES)}",
        nargs="+", metavar="STAGE", to_field=tuple,
    )  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    args, _ = COMMAND.parse(RehearsalFlags, argv)
    # A `kill` (SIGTERM) unwinds like Ctrl-C, so the servers and Ray nodes it started are stopped too.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="audioscale-rehearsal-") as scratch:
        work = Path(args.work or scratch).absolute()
        report = run_rehearsal(work, only=tuple(args.only), say=lambda line: print(line, flush=True))
    print(format_report(report))
    print(f"[rehearsal] {'all checks held' if report.ok else 'FAILED'} in {time.monotonic() - started:.0f} s")
    return 0 if report.ok else 1


def cli() -> int:
    """`python -m cluster.rehearsal`: a stage named wrongly is one line, exit code 2 (pipeline.cli.command)."""
    return COMMAND.run(main)


if __name__ == "__main__":
    sys.exit(cli())
