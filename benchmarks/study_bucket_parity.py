"""One Q wherever a study runs: the same small study run with its shards and Ray storage on local disk, and
with both in a bucket (the cluster rehearsal's S3-compatible store on loopback), side by side.

    python benchmarks/study_bucket_parity.py [--grid compute] [--keep DIR]

Each study is `python -m sweeps.scaling` as a user types it, on the rehearsal's generated audio and
pitch task (`cluster.rehearsal.audio`), with the rehearsal's study settings (`--eval-checkpoints final
--baselines none --n-bootstrap 20 --max-concurrent 1`), its MLflow store a local SQLite file each.
Printed: every trial's R and Q from both, whether they are equal to the last digit, and each study's
closing lines.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cluster.rehearsal.audio import write_pitch_task, write_pretraining_audio  # noqa: E402
from cluster.rehearsal.object_store import running_object_store  # noqa: E402
from sweeps.record.study import read_study  # noqa: E402

STUDY = "parity"


def run_study(
    grid: str, *, corpus: Path, tasks: Path, shards: str, storage: str, tracking_uri: str, log: Path
) -> float:
    argv = [sys.executable, "-m", "sweeps.scaling", "--grid", grid, "--study", STUDY, "--corpus", str(corpus),
            "--tasks", str(tasks), "--shards", shards, "--storage-path", storage, "--tracking-uri", tracking_uri,
            "--eval-checkpoints", "final", "--baselines", "none", "--n-bootstrap", "20", "--max-concurrent", "1"]  # fmt: skip
    started = time.monotonic()
    with open(log, "w") as output:
        done = subprocess.run(argv, stdout=output, stderr=subprocess.STDOUT, env=os.environ)
    if done.returncode != 0:
        raise SystemExit(f"the study ({shards}) failed; its log is {log}:\n{log.read_text()[-3000:]}")
    return time.monotonic() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--grid", default="compute", help="the study's grid (default: the rehearsal's)")
    parser.add_argument("--keep", type=Path, default=None, help="folder to keep the logs and stores in")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="study-parity-") as scratch:
        work = (args.keep or Path(scratch)).absolute()
        work.mkdir(parents=True, exist_ok=True)
        with running_object_store(work) as store:
            os.environ.update(store.env())
            corpus, tasks = write_pretraining_audio(work / "audio"), write_pitch_task(work / "tasks")
            places = {
                "local": (str(work / "local-shards"), str(work / "local-runs")),
                "bucket": (store.uri("parity-shards"), store.uri("parity-runs")),
            }
            results, seconds = {}, {}
            for where, (shards, storage) in places.items():
                uri = f"sqlite:///{work / f'{where}.db'}"
                seconds[where] = run_study(args.grid, corpus=corpus, tasks=tasks, shards=shards, storage=storage,
                                           tracking_uri=uri, log=work / f"{where}.log")  # fmt: skip
                results[where] = {trial.trial: trial for trial in read_study(uri, STUDY).trials()}
        print(f"{args.grid} study, shards and storage local (one run) and in a bucket (the other):")
        print(f"{'trial':<14}{'R local':>12}{'R bucket':>12}{'Q local':>14}{'Q bucket':>14}  normalisation")
        equal = True
        for name, local in sorted(results["local"].items()):
            remote = results["bucket"][name]
            equal &= (local.rankme, local.q, local.task_scores) == (remote.rankme, remote.q, remote.task_scores)
            inputs = f"{local.reading.get('input_normalisation')} / {remote.reading.get('input_normalisation')}"
            print(f"{name:<14}{local.rankme:>12.6f}{remote.rankme:>12.6f}{local.q:>14.10f}{remote.q:>14.10f}  {inputs}")
        print(f"every trial's R, Q and task scores equal to the last digit: {equal}")
        print(f"time: local {seconds['local'] / 60:.1f} min, bucket {seconds['bucket'] / 60:.1f} min")
        for where in places:
            closing = (work / f"{where}.log").read_text().split(f"== study {STUDY}")[-1].splitlines()[:8]
            print(f"--- {where}: == study {STUDY}" + "\n".join(closing))


if __name__ == "__main__":
    main()
