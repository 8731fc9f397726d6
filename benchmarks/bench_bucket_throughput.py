"""What a bucket changes: prep writing into it, and the training reader reading from it, side by side
with the same work on local disk, against the cluster rehearsal's S3-compatible store on loopback.

    python benchmarks/bench_bucket_throughput.py [--minutes 30] [--seconds 6] [--repeats 3]

- Prep: `python -m pipeline.prep` of the same synthetic audio (`cluster.rehearsal.audio`, --minutes
  of 10 s files, cut into 2 s rows) from a local folder into a local folder, and from the bucket into
  the bucket, alternated, --repeats times each: the median of prep's own elapsed time (its manifest's
  elapsed_s) and of its rows per CPU-second (the CPU time of prep's whole process tree, its Ray
  workers included, from the kernel's accounting of the finished processes; the store's is not in it).
- Reader: the training reader (`pipeline.shards.crop_stream`, as `bench_reader_budget.py` runs it:
  one single-threaded process, steady state after a first epoch, 200-frame crops as float16, the
  training default of 256 rows per shuffle window, so 30 minutes (900 rows) are re-read from
  storage every epoch rather than held from the previous window) over the
  same shards in the bucket and on local disk: crops per CPU-second of the reader process (what the
  per-GPU core budget in cluster/README.md is made of) and crops per wall-second.

The store is moto, a Python server sharing this machine's cores, and the bytes travel over
loopback: the wall-clock figures say what a slow, CPU-bound store costs, not what S3 delivers; the
per-CPU-second figure is the reader's own cost of a remote read, which is what a cluster's node pays.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench_reader_budget import per_core_rate  # noqa: E402

CROP_FRAMES = 200  # audiomae++-base's 2 s crop (80-mel audiomae preset, 10 ms hop)


def prep_run(audio: str, output: str) -> tuple[float, float]:
    """(prep's own elapsed time, its rows per CPU-second) for one fresh run: the CPU time of the prep
    process and every descendant it waited for (Ray's raylet and workers), as the kernel counts them."""
    from pipeline.shards.format import read_manifest

    command = [sys.executable, "-m", "pipeline.prep", "--input", audio, "--output", output,
               "--preset", "audiomae", "--segment-s", "2", "--no-progress"]  # fmt: skip
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(command, env=os.environ, check=True, capture_output=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu_s = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    manifest = read_manifest(output)
    return float(manifest["elapsed_s"]), manifest["num_rows"] / cpu_s


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=30.0, help="minutes of audio to prep and read")
    parser.add_argument("--seconds", type=float, default=6.0, help="timed seconds per reader measurement")
    parser.add_argument("--repeats", type=int, default=3, help="prep runs per destination")
    args = parser.parse_args()
    from cluster.rehearsal.audio import write_pretraining_audio
    from cluster.rehearsal.object_store import running_object_store

    with tempfile.TemporaryDirectory(prefix="bench-bucket-") as scratch, running_object_store(Path(scratch)) as store:
        work = Path(scratch)
        os.environ.update(store.env(), RAY_AUTH_MODE="disabled")  # the spawned readers inherit it
        audio = write_pretraining_audio(work / "audio", files=int(args.minutes * 6), seconds=10.0)
        print(
            f"{args.minutes:g} min of audio; store {store.endpoint} (moto on loopback); {args.repeats} prep runs each"
        )
        client = store.client()
        for path in sorted(audio.iterdir()):
            client.upload_file(str(path), store.bucket, f"audio/{path.name}")
        runs: dict[str, list[tuple[float, float]]] = {"local": [], "bucket": []}
        for repeat in range(args.repeats):
            runs["local"].append(prep_run(str(audio), str(work / f"local-{repeat}")))
            runs["bucket"].append(prep_run(store.uri("audio"), store.uri(f"shards-{repeat}")))
        (local_s, local_rate), (bucket_s, bucket_rate) = (
            tuple(statistics.median(values) for values in zip(*runs[where])) for where in ("local", "bucket")
        )
        print(f"prep, folder to folder and bucket to bucket: elapsed local {local_s:.1f} s, bucket {bucket_s:.1f} s "
              f"(bucket / local {bucket_s / local_s:.2f}); rows per CPU-second local {local_rate:.1f}, "
              f"bucket {bucket_rate:.1f} (bucket / local {bucket_rate / local_rate:.2f}); medians of {args.repeats}")  # fmt: skip
        for clock_name, clock in (("CPU-second of the reader", time.process_time), ("wall-second", time.monotonic)):
            local = per_core_rate(str(work / "local-0"), CROP_FRAMES, cores=1, seconds=args.seconds,
                                  normalise=False, clock=clock)  # fmt: skip
            bucket = per_core_rate(store.uri("shards-0"), CROP_FRAMES, cores=1, seconds=args.seconds,
                                   normalise=False, clock=clock)  # fmt: skip
            print(f"reader, crops per {clock_name}: local {local:,.0f}, bucket {bucket:,.0f} "
                  f"(bucket / local {bucket / local:.2f})")  # fmt: skip


if __name__ == "__main__":
    main()
