"""What a prep killed half-way costs: an uninterrupted prep against one SIGKILLed once half its batches
are recorded, then run again to the end (pipeline.prep.progress), side by side on the same audio.

    python benchmarks/bench_prep_resume.py [--minutes 30] [--repeats 3]

Each run is `python -m pipeline.prep` as a user types it (its own local Ray), timed whole from the outside.
The kill is the test hook `AUDIOSCALE_TEST_PREP_KILL_AFTER_BATCHES` (the driver SIGKILLs itself once that
many batch records have reached it; its process group, Ray's processes, goes with it). Printed: the median
wall time of the uninterrupted run, of the killed run and of the run that finished it, the resumed run's
share of the uninterrupted one, and whether the finished shards equal the uninterrupted ones byte for byte.
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pipeline.prep.debug_hooks import KILL_AFTER_BATCHES  # noqa: E402
from pipeline.shards.format import read_manifest  # noqa: E402


def timed_prep(audio: Path, output: Path, kill_after: int | None = None) -> float:
    """Wall seconds of one `python -m pipeline.prep` (killed by the hook when `kill_after` is given)."""
    env = {**os.environ, **({KILL_AFTER_BATCHES: str(kill_after)} if kill_after else {})}
    command = [sys.executable, "-m", "pipeline.prep", "--input", str(audio), "--output", str(output),
               "--preset", "audiomae", "--segment-s", "2", "--no-progress"]  # fmt: skip
    started = time.monotonic()
    process = subprocess.Popen(command, env=env, start_new_session=True, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)  # fmt: skip
    code = process.wait()
    seconds = time.monotonic() - started
    try:
        os.killpg(process.pid, signal.SIGKILL)  # what the killed driver left of Ray
    except ProcessLookupError:
        pass
    expected = -signal.SIGKILL if kill_after else 0
    if code != expected:
        raise SystemExit(f"prep into {output} ended with {code}, expected {expected}")
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=30.0, help="minutes of audio (10 s files)")
    parser.add_argument("--repeats", type=int, default=3, help="runs of each kind")
    args = parser.parse_args()
    from cluster.rehearsal.audio import write_pretraining_audio

    with tempfile.TemporaryDirectory(prefix="bench-prep-resume-") as scratch:
        work = Path(scratch)
        audio = write_pretraining_audio(work / "audio", files=int(args.minutes * 6), seconds=10.0)
        whole, killed, resumed, equal = [], [], [], []
        for repeat in range(args.repeats):
            whole.append(timed_prep(audio, work / f"whole-{repeat}"))
            batches = len(read_manifest(work / f"whole-{repeat}")["part_files"])
            killed.append(timed_prep(audio, work / f"cut-{repeat}", kill_after=batches // 2))
            resumed.append(timed_prep(audio, work / f"cut-{repeat}"))
            equal.append(
                read_manifest(work / f"cut-{repeat}")["part_files"]
                == read_manifest(work / f"whole-{repeat}")["part_files"]
            )
        median = statistics.median
        print(f"{args.minutes:g} min of audio in {batches} batches, {args.repeats} runs of each (medians):")
        print(f"uninterrupted {median(whole):.1f} s; killed after {batches // 2} batches {median(killed):.1f} s, "
              f"then finished in {median(resumed):.1f} s ({median(resumed) / median(whole):.2f} of uninterrupted); "
              f"killed + finished {median(k + r for k, r in zip(killed, resumed)) / median(whole):.2f}x")  # fmt: skip
        print(f"finished shards equal to the uninterrupted ones, byte for byte: {all(equal)}")


if __name__ == "__main__":
    main()
