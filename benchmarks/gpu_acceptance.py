"""GPU acceptance in one command: is training correct and fast on this device, does the reader keep up,
do RankMe and the probes run there? Imports neither Ray nor MLflow (the GPU machines have neither):
it runs the product's own pieces directly (models, the worker's step and optimizer, the crop reader,
RankMe, the probes) on audio it synthesises and shards it writes with prep's per-file code.

  python benchmarks/gpu_acceptance.py --out /tmp/acceptance                  # the GPU run (<= 8 min on an H100)
  python benchmarks/gpu_acceptance.py --out /tmp/acceptance --device cpu --tiny   # the same paths, < 1 min

Sections, in order (`--sections` picks some): audio (synthesis, shards, HuBERT's codebook, in --work),
correctness (benchmarks/acceptance/correctness.py), speed (speed.py), profile (a torch.profiler kernel
table of the two paper-batch models, eager, `profile-MODEL.txt` in --out), reader (reader.py), rankme and
probes (rankme_probes.py). Progress goes to stderr as each part finishes; `results.json` in --out is
rewritten after every section (a run cut short keeps what it measured); the table is printed last.
Exit status 1 when a check fails its tolerance or a goal (40% MFU, a reader that keeps the device
>= 90% busy) is missed; the table says which.
"""

from __future__ import annotations

import argparse
import functools
import importlib.util
import json
import math
import os
import shutil
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

# Every third-party package the run imports (tests/test_gpu_acceptance.py checks the list against the
# imports). The GPU machines this was written for have all but soundfile (and its cffi), and no network.
NEEDED_PACKAGES = ("torch", "torchaudio", "numpy", "scipy", "sklearn", "pyarrow", "safetensors", "soundfile")
OFFLINE_INSTALL = (
    "on a machine with network: python -m pip download --no-deps --only-binary=:all: --python-version 3.12 "
    "--implementation cp --platform manylinux_2_28_x86_64 --platform manylinux2014_x86_64 -d wheels "
    "soundfile cffi pycparser; copy wheels/ over, then: python -m pip install --no-index --no-deps --target "
    "/tmp/site wheels/*.whl and run with PYTHONPATH=/tmp/site"
)


def check_packages() -> None:
    """Stop before any work when a package is missing, naming it and how to bring it to an offline machine."""
    missing = [name for name in NEEDED_PACKAGES if importlib.util.find_spec(name) is None]
    if missing:
        raise SystemExit(f"gpu_acceptance needs {', '.join(missing)}, missing here; {OFFLINE_INSTALL}")


check_packages()

import torch  # noqa: E402

from benchmarks.acceptance import audio_shards, correctness, measure, rankme_probes, reader, speed  # noqa: E402
from benchmarks.acceptance.plan import FULL, TINY, Plan  # noqa: E402
from benchmarks.acceptance.table import render  # noqa: E402
from pipeline.targets import ensure_codebook  # noqa: E402

SECTIONS = ("audio", "correctness", "speed", "profile", "reader", "rankme", "probes")
MFU_GOAL = 0.40  # the goal for mae-en768-12 and audiomae++-base, of the 989 TFLOP/s datasheet peak
BUSY_GOAL = 0.90  # one reader thread should leave the device idle at most a tenth of the time


class Progress:
    """Progress lines with the time since the start, and the time budget the run keeps to."""

    def __init__(self, budget_minutes: float = math.inf) -> None:
        self.began = time.perf_counter()
        self.budget_minutes = budget_minutes

    def __call__(self, line: str) -> None:
        print(f"[{time.perf_counter() - self.began:6.1f} s] {line}", file=sys.stderr, flush=True)

    def spent(self) -> bool:
        return time.perf_counter() - self.began > 60 * self.budget_minutes


def environment(device: torch.device, plan: Plan) -> dict:
    peak = measure.datasheet_peak_tflops(device)
    matmul = measure.matmul_tflops(device, size=plan.matmul_size)
    summary = (f"{measure.device_name(device)}, torch {torch.__version__}, {os.cpu_count()} CPUs; "
               f"matmul measured {matmul:.1f} TFLOP/s" + (f", datasheet bf16 peak {peak:.0f}" if peak else ""))  # fmt: skip
    return {"device": measure.device_name(device), "torch": torch.__version__, "cuda": torch.version.cuda,
            "cpus": os.cpu_count(), "plan": plan.name, "datasheet_tflops": peak, "matmul_tflops": matmul,
            "summary": summary}  # fmt: skip


def run_audio(plan: Plan, out: Path, say: Progress) -> dict:
    files = audio_shards.write_audio(out / "audio", clips_per_kind=plan.clips_per_kind, seconds=plan.clip_s)
    say(f"audio: {len(files)} clips of {plan.clip_s:.0f} s synthesised")
    threads = os.cpu_count() or 1
    shards = {}
    for preset in plan.shard_presets:
        shards[preset] = str(audio_shards.write_shards(files, out / f"shards-{preset}", preset_name=preset,
                                                       segment_s=plan.segment_s, threads=threads))  # fmt: skip
        say(f"audio: {preset} shards written by prep's per-file code")
    codebook = ensure_codebook(Path(shards["waveform"]), clusters=plan.codebook_clusters, crop_frames=100,
                               sample_fraction=1.0, cache_dir=out / "codebooks", log=lambda line: None)  # fmt: skip
    say(f"audio: HuBERT codebook of {plan.codebook_clusters} clusters fitted")
    return {"files": [[str(path), kind] for path, kind in files], "shards": shards, "codebook": str(codebook)}


def overrides_for(model_name: str, audio: dict) -> dict:
    return {"codebook": audio["codebook"]} if model_name.startswith("hubert") else {}


def contained(section: str, label: str, measure_one: Callable[[], dict | None], say: Progress, *, keys: dict) -> dict:
    """`measure_one()`'s row, or a row naming its error: one failing model must not cost a lease the rest.
    Once the time budget is spent, the remaining parts are not started (rows that say so), so a lease keeps
    its time for a second run."""
    began = time.perf_counter()
    if say.spent():
        say(f"{section}: {label} not run: the {say.budget_minutes:g}-minute budget is spent")
        return {**keys, "skipped": f"not run: the {say.budget_minutes:g}-minute budget was spent before it"}
    try:
        row = dict(measure_one() or {})
    except Exception as error:  # noqa: BLE001 - reported in the row, the table and the exit status
        traceback.print_exc()
        row = {**keys, "error": f"{type(error).__name__}: {error}"[:400]}
    finally:
        torch._dynamo.reset()  # a fresh compile cache per model: no recompile limit reached across models
    row["seconds"] = time.perf_counter() - began
    outcome = row.get("error") or "; ".join(row.get("problems", [])) or "ok"
    if "samples_per_s" in row:
        outcome = f"{row['samples_per_s']:.0f} samples/s"
    say(f"{section}: {label} {outcome} ({row['seconds']:.1f} s)")
    return row


def run_correctness(plan: Plan, device: torch.device, audio: dict, say: Progress) -> list[dict]:
    rows = []
    for index, name in enumerate(plan.correctness_models, 1):
        backend = plan.compile_backend if name in plan.compiled_correctness_models else None
        measure_one = functools.partial(correctness.check_model, name, device, batch_size=plan.check_batch,
                                        steps=plan.check_steps, compile_backend=backend,
                                        overrides=overrides_for(name, audio))  # fmt: skip
        label = f"{index}/{len(plan.correctness_models)} {name}"
        rows.append(contained("correctness", label, measure_one, say, keys={"model": name}))
    return rows


def run_speed(plan: Plan, device: torch.device, audio: dict, peaks: dict, say: Progress) -> list[dict]:
    rows = []
    for index, (name, batch, compiled) in enumerate(plan.speed_runs, 1):
        measure_one = functools.partial(speed.measure_model, name, device, global_batch=batch,
                                        compile_backend=plan.compile_backend if compiled else None,
                                        warmup=plan.warmup_steps, timed=plan.timed_steps, peaks=peaks,
                                        overrides=overrides_for(name, audio))  # fmt: skip
        label = f"{index}/{len(plan.speed_runs)} {name}{' compiled' if compiled else ''} at batch {batch}"
        rows.append(contained("speed", label, measure_one, say, keys={"model": name, "compiled": compiled}))
    return rows


def run_profiles(plan: Plan, device: torch.device, speed_rows: list[dict], out: Path, say: Progress) -> list[str]:
    """A kernel table per profiled model's eager speed run (its fitted micro-batch), beside results.json.
    Eager only: it is the product's default (`--compile` is opt-in), and a second compile would cost a minute."""
    written = []
    for row in speed_rows:
        if row["model"] not in plan.profiled_models or row["compiled"] or "step_s" not in row:
            continue
        path = out / f"profile-{row['model']}.txt"
        measure_one = functools.partial(speed.profile_steps, row["model"], device, micro_batch=row["micro_batch"],
                                        global_batch=row["global_batch"], compile_backend=None, steps=2,
                                        out_file=path)  # fmt: skip
        if "error" not in contained("profile", path.name, measure_one, say, keys={}):
            written.append(path.name)
    return written


def run_reader(plan: Plan, device: torch.device, audio: dict, speed_rows: list[dict], say: Progress) -> list[dict]:
    rows = []
    for name, preset, batch in plan.reader_runs:
        fitted = [row["micro_batch"] for row in speed_rows if row.get("micro_batch") and row["model"] == name
                  and row["global_batch"] == batch]  # fmt: skip
        measure_one = functools.partial(reader.measure_reader, name, audio["shards"][preset], device,
                                        global_batch=batch, micro_batch=min(fitted) if fitted else batch,
                                        reader_counts=plan.reader_counts, warmup=plan.warmup_steps,
                                        timed=plan.timed_steps)  # fmt: skip
        label = f"{name} with {', '.join(map(str, plan.reader_counts))} reader thread(s)"
        rows.append(contained("reader", label, measure_one, say, keys={"model": name}))
    return rows


def run_probes(plan: Plan, device: torch.device, audio: dict) -> dict:
    import soundfile  # the synthesised clips, read back as prep's input was

    waves = [soundfile.read(path, dtype="float32")[0] for path, _ in audio["files"]]
    kinds = [audio_shards.SOUND_KINDS.index(kind) for _, kind in audio["files"]]
    return rankme_probes.embed_and_probe(plan.probe_model, waves, kinds, device)


def problems(results: dict) -> list[str]:
    """Every failed tolerance and missed goal, in words."""
    found = [
        f"{row['model']}: {problem}" for row in results.get("correctness", []) for problem in row.get("problems", [])
    ]
    for section in ("correctness", "speed", "reader"):
        for row in results.get(section, []):
            if "error" in row or "skipped" in row:
                found.append(
                    f"{section} {row['model']}: " + (f"failed ({row['error']})" if "error" in row else row["skipped"])
                )
    for section in ("rankme", "probes"):
        row = results.get(section, {})
        if "error" in row or "skipped" in row:
            found.append(
                f"{section}: " + (f"failed ({row['error']})" if "error" in row else f"skipped ({row['skipped']})")
            )
    for row in results.get("speed", []):
        mfu = row.get("mfu_vs_datasheet")
        if row["model"] in ("mae-en768-12", "audiomae++-base") and mfu is not None and mfu < MFU_GOAL:
            found.append(f"{row['model']}{' compiled' if row['compiled'] else ''}: MFU {mfu:.1%}, goal {MFU_GOAL:.0%}")
    for row in results.get("reader", []):
        busy = row.get("readers_1", {}).get("busy_fraction")
        if busy is not None and busy < BUSY_GOAL:  # a reader row without readers_1 failed (listed above)
            found.append(f"{row['model']}: one reader thread keeps the device {busy:.0%} busy, goal {BUSY_GOAL:.0%}")
    if "rankme" in results and not results["rankme"].get("agrees", True):
        found.append(f"RankMe on the device differs from the CPU's by {results['rankme']['relative_gap']:.1e}")
    for module in ("ray", "mlflow"):
        if module in sys.modules:
            found.append(f"{module} was imported: the GPU machines do not have it")
    return found


def compile_speedups(speed_rows: list[dict]) -> dict[str, float]:
    """Compiled samples/s over eager, per model measured both ways at the same batch."""
    measured = {(row["model"], row["compiled"]): row["samples_per_s"] for row in speed_rows if "samples_per_s" in row}
    return {model: rate / measured[(model, False)] for (model, compiled), rate in measured.items()
            if compiled and (model, False) in measured}  # fmt: skip


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True, help="folder for results.json and the profiles")
    parser.add_argument("--work", help="folder for the audio, shards and codebook (default: a temporary one, removed)")
    parser.add_argument("--device", choices=("auto", "cuda", "cpu"), default="auto")
    parser.add_argument("--budget-minutes", type=float, default=8.0,
                        help="start no new part after this long (default 8: the GPU run's target)")  # fmt: skip
    parser.add_argument("--tiny", action="store_true", help="debug sizes and a few steps: the paths, not the figures")
    parser.add_argument(
        "--sections", default=",".join(SECTIONS), help=f"comma-separated subset of {','.join(SECTIONS)}"
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    sections = [name.strip() for name in args.sections.split(",") if name.strip()]
    unknown = sorted(set(sections) - set(SECTIONS))
    if unknown:
        raise SystemExit(f"--sections: unknown {', '.join(unknown)}; choose from {', '.join(SECTIONS)}")
    device, plan = measure.pick_device(args.device), TINY if args.tiny else FULL
    args.out.mkdir(parents=True, exist_ok=True)
    say = Progress(args.budget_minutes)
    results = {"environment": environment(device, plan)}
    say(f"on {results['environment']['summary']}")
    peaks = {"datasheet": results["environment"]["datasheet_tflops"],
             "measured_matmul": results["environment"]["matmul_tflops"]}  # fmt: skip
    needs_audio = any(name != "rankme" for name in sections)
    work = Path(args.work) if args.work else Path(tempfile.mkdtemp(prefix="gpu-acceptance-"))
    audio = run_audio(plan, work, say) if needs_audio else {}

    def save() -> None:
        (args.out / "results.json").write_text(json.dumps(results, indent=2, default=str) + "\n")

    steps = {
        "correctness": lambda: run_correctness(plan, device, audio, say),
        "speed": lambda: run_speed(plan, device, audio, peaks, say),
        "profile": lambda: run_profiles(plan, device, results.get("speed", []), args.out, say),
        "reader": lambda: run_reader(plan, device, audio, results.get("speed", []), say),
        "rankme": lambda: contained(
            "rankme",
            f"{plan.rankme_n} x {plan.rankme_dim}",
            functools.partial(rankme_probes.compare_rankme, device, n=plan.rankme_n, dim=plan.rankme_dim),
            say,
            keys={},
        ),
        "probes": lambda: contained(
            "probes",
            plan.probe_model,
            functools.partial(run_probes, plan, device, audio),
            say,
            keys={"model": plan.probe_model},
        ),
    }
    for name in SECTIONS[1:]:
        if name in sections:
            results[name] = steps[name]()
            save()
    results["problems"] = problems(results)
    results["compile_speedup"] = compile_speedups(results.get("speed", []))
    results["total_s"] = time.perf_counter() - say.began
    save()
    if not args.work:
        shutil.rmtree(work, ignore_errors=True)
    print(render(results))
    return 1 if results["problems"] else 0


if __name__ == "__main__":
    sys.exit(main())
