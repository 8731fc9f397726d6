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

import argparse
import signal
import sys
import tempfile
import time
from pathlib import Path

from cluster.rehearsal.plan import STAGES, format_report, run_rehearsal


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m cluster.rehearsal", description=__doc__.split("\n")[0])
    parser.add_argument(
        "--work", default=None, help="folder for logs, audio and the run database (default: a temporary one)"
    )
    parser.add_argument(
        "--only", nargs="+", default=(), metavar="STAGE",
        help=f"run these stages (and those they need): {', '.join(repr(name) for name, *_ in STAGES)}",
    )  # fmt: skip
    args = parser.parse_args(argv)
    # A `kill` (SIGTERM) unwinds like Ctrl-C, so the servers and Ray nodes it started are stopped too.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="audioscale-rehearsal-") as scratch:
        work = Path(args.work or scratch).absolute()
        report = run_rehearsal(work, only=tuple(args.only), say=lambda line: print(line, flush=True))
    print(format_report(report))
    print(f"[rehearsal] {'all checks held' if report.ok else 'FAILED'} in {time.monotonic() - started:.0f} s")
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
