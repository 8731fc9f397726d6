"""GPU acceptance in one command: is training correct and fast on this device, does the reader keep up,
do RankMe and the probes run there? Imports neither Ray nor MLflow (the GPU machines have neither):
it runs the product's own pieces directly (models, the worker's step and optimizer, the crop reader,
RankMe, the probes) on audio it synthesises and shards it writes with prep's per-file code.

  python benchmarks/gpu_acceptance.py --out /tmp/acceptance                  # the GPU run (<= 8 min on an H100)
  python benchmarks/gpu_acceptance.py --out /tmp/acceptance --device cpu --tiny   # the same paths, < 1 min

Sections, in the order they run (`--sections` picks some; the scarce figures first): audio (synthesis,
shards, HuBERT's codebook, in --work), speed (benchmarks/acceptance/speed.py: eager runs, then compiled),
profile (a torch.profiler kernel table per paper-batch model, eager, `profile-MODEL.txt` in --out),
reader (reader.py), rankme and probes (rankme_probes.py), correctness (correctness.py). Progress goes
to stderr as each part finishes and `results.json` in --out is rewritten after every part (a run cut
short keeps what it measured); no part starts once --budget-minutes are spent; the table is printed
last. Exit status 1 when a check fails its tolerance, a goal (40% MFU, a reader that keeps the device
>= 90% busy) is missed, or a part failed or was not run; the table says which.
"""

from __future__ import annotations

import argparse
import functools
import importlib.util
import os
import shutil
import sys
import tempfile
import time
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


# torchaudio is in maintenance and drops APIs between releases: the ones the front end and HuBERT's labels use.
TORCHAUDIO_FUNCTIONS = ("compliance.kaldi.mfcc", "functional.compute_deltas", "functional.melscale_fbanks",
                        "functional.resample", "transforms.Resample")  # fmt: skip


def check_packages() -> None:
    """Stop before any work when a package or a torchaudio function is missing, naming it (and, for a
    package, how to bring it to an offline machine)."""
    missing = [name for name in NEEDED_PACKAGES if importlib.util.find_spec(name) is None]
    if missing:
        raise SystemExit(f"gpu_acceptance needs {', '.join(missing)}, missing here; {OFFLINE_INSTALL}")
    import torchaudio
    import torchaudio.compliance.kaldi  # noqa: F401 - loads the submodule the attribute walk needs

    def present(path: str) -> bool:
        target = torchaudio
        for part in path.split("."):
            target = getattr(target, part, None)
        return target is not None

    absent = [f"torchaudio.{path}" for path in TORCHAUDIO_FUNCTIONS if not present(path)]
    if absent:
        raise SystemExit(f"this torchaudio ({torchaudio.__version__}) lacks {', '.join(absent)}: install 2.9-2.11")


check_packages()

import torch  # noqa: E402

from benchmarks.acceptance import audio_shards, correctness, measure, rankme_probes, reader, speed  # noqa: E402
from benchmarks.acceptance.plan import FULL, TINY, Plan  # noqa: E402
from benchmarks.acceptance.runner import Run  # noqa: E402
from benchmarks.acceptance.table import render  # noqa: E402
from benchmarks.acceptance.verdict import compile_speedups, problems  # noqa: E402
from pipeline.targets import ensure_codebook  # noqa: E402

SECTIONS = ("audio", "speed", "profile", "reader", "rankme", "probes", "correctness")
# Starts no part after this. On an H200 every part took 6.9 min in all (6.6 min to the 7th correctness
# model, then 21 s for the last 5), and the longest part begun late, a debug model's compile, 33 s: a
# part begun at 7.5 min ends within 8 minutes.
DEFAULT_BUDGET_MINUTES = 7.5


def environment(device: torch.device, plan: Plan) -> dict:
    peak = measure.datasheet_peak_tflops(device)
    matmul = measure.matmul_tflops(device, size=plan.matmul_size)
    compile_error = measure.compile_error(device, plan.compile_backend)
    summary = (f"{measure.device_name(device)}, torch {torch.__version__}, {os.cpu_count()} CPUs; "
               f"matmul measured {matmul:.1f} TFLOP/s" + (f", datasheet bf16 peak {peak:.0f}" if peak else ""))  # fmt: skip
    return {"device": measure.device_name(device), "torch": torch.__version__, "cuda": torch.version.cuda,
            "cpus": os.cpu_count(), "plan": plan.name, "datasheet_tflops": peak, "matmul_tflops": matmul,
            "compile_backend": plan.compile_backend, "compile_error": compile_error, "summary": summary}  # fmt: skip


def run_audio(plan: Plan, work: Path, run: Run) -> dict:
    files = audio_shards.write_audio(work / "audio", clips_per_kind=plan.clips_per_kind, seconds=plan.clip_s)
    run.say(f"audio: {len(files)} clips of {plan.clip_s:.0f} s synthesised")
    shards = {}
    for preset in plan.shard_presets:
        shards[preset] = str(audio_shards.write_shards(files, work / f"shards-{preset}", preset_name=preset,
                                                       segment_s=plan.segment_s, threads=os.cpu_count() or 1))  # fmt: skip
        run.say(f"audio: {preset} shards written by prep's per-file code")
    codebook = ensure_codebook(Path(shards["waveform"]), clusters=plan.codebook_clusters, crop_frames=100,
                               sample_fraction=1.0, cache_dir=work / "codebooks", log=lambda line: None)  # fmt: skip
    run.say(f"audio: HuBERT codebook of {plan.codebook_clusters} clusters fitted")
    return {"files": [[str(path), kind] for path, kind in files], "shards": shards, "codebook": str(codebook)}


def overrides_for(model_name: str, audio: dict) -> dict:
    return {"codebook": audio["codebook"]} if model_name.startswith("hubert") else {}


def fitted_micro_batch(run: Run, model_name: str, global_batch: int) -> int | None:
    """The micro-batch an earlier speed run of this model and batch fitted into memory, if any."""
    fitted = [row["micro_batch"] for row in run.results.get("speed", []) if "micro_batch" in row
              and row["model"] == model_name and row["global_batch"] == global_batch]  # fmt: skip
    return min(fitted) if fitted else None


def run_correctness(plan: Plan, device: torch.device, audio: dict, run: Run) -> None:
    compiles = not run.results["environment"]["compile_error"]
    for index, name in enumerate(plan.correctness_models, 1):
        backend = plan.compile_backend if compiles and name in plan.compiled_correctness_models else None
        measure_one = functools.partial(correctness.check_model, name, device, batch_size=plan.check_batch,
                                        steps=plan.check_steps, compile_backend=backend,
                                        overrides=overrides_for(name, audio))  # fmt: skip
        run.part("correctness", f"{index}/{len(plan.correctness_models)} {name}", measure_one, keys={"model": name})


def run_speed(plan: Plan, device: torch.device, audio: dict, run: Run) -> None:
    env = run.results["environment"]
    peaks = {"datasheet": env["datasheet_tflops"], "measured_matmul": env["matmul_tflops"]}
    for index, (name, batch, compiled) in enumerate(plan.speed_runs, 1):
        label = f"{index}/{len(plan.speed_runs)} {name}{' compiled' if compiled else ''} at batch {batch}"
        keys = {"model": name, "compiled": compiled, "global_batch": batch}
        if compiled and env["compile_error"]:
            run.part("speed", label, lambda keys=keys: {**keys, "skipped": "not run: torch.compile failed its preflight"},
                     keys=keys)  # fmt: skip
            continue
        measure_one = functools.partial(speed.measure_model, name, device, global_batch=batch,
                                        compile_backend=plan.compile_backend if compiled else None,
                                        warmup=plan.warmup_steps, timed=plan.timed_steps, peaks=peaks,
                                        start_micro_batch=fitted_micro_batch(run, name, batch),
                                        overrides=overrides_for(name, audio))  # fmt: skip
        run.part("speed", label, measure_one, keys=keys)


def run_profiles(plan: Plan, device: torch.device, run: Run) -> None:
    """A kernel table per profiled model's eager speed run (its fitted micro-batch), beside results.json.
    Eager only: it is the product's default (`--compile` is opt-in), and a second compile would cost a minute."""
    for row in list(run.results.get("speed", [])):
        if row["model"] not in plan.profiled_models or row["compiled"] or "step_s" not in row:
            continue
        path = run.out / f"profile-{row['model']}.txt"
        measure_one = functools.partial(speed.profile_steps, row["model"], device, micro_batch=row["micro_batch"],
                                        global_batch=row["global_batch"], compile_backend=None, steps=2,
                                        out_file=path)  # fmt: skip
        run.part("profile", path.name, measure_one, keys={"model": row["model"]})


def run_reader(plan: Plan, device: torch.device, audio: dict, run: Run) -> None:
    for name, preset, batch, fallback_micro in plan.reader_runs:
        measure_one = functools.partial(reader.measure_reader, name, audio["shards"][preset], device,
                                        global_batch=batch, micro_batch=fitted_micro_batch(run, name, batch) or fallback_micro,
                                        reader_counts=plan.reader_counts, warmup=plan.warmup_steps,
                                        timed=plan.timed_steps)  # fmt: skip
        label = f"{name} with {', '.join(map(str, plan.reader_counts))} reader thread(s)"
        run.part("reader", label, measure_one, keys={"model": name})


def probe_clips(plan: Plan, device: torch.device, audio: dict) -> dict:
    import soundfile  # the synthesised clips, read back as prep's input was

    waves = [soundfile.read(path, dtype="float32")[0] for path, _ in audio["files"]]
    kinds = [audio_shards.SOUND_KINDS.index(kind) for _, kind in audio["files"]]
    return rankme_probes.embed_and_probe(plan.probe_model, waves, kinds, device)


def run_section(name: str, plan: Plan, device: torch.device, audio: dict, run: Run) -> None:
    if name == "speed":
        run_speed(plan, device, audio, run)
    elif name == "profile":
        run_profiles(plan, device, run)
    elif name == "reader":
        run_reader(plan, device, audio, run)
    elif name == "rankme":
        compare = functools.partial(rankme_probes.compare_rankme, device, n=plan.rankme_n, dim=plan.rankme_dim)
        run.part("rankme", f"{plan.rankme_n} x {plan.rankme_dim}", compare, keys={}, one_row=True)
    elif name == "probes":
        probe = functools.partial(probe_clips, plan, device, audio)
        run.part("probes", plan.probe_model, probe, keys={"model": plan.probe_model}, one_row=True)
    elif name == "correctness":
        run_correctness(plan, device, audio, run)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True, help="folder for results.json and the profiles")
    parser.add_argument("--work", help="folder for the audio, shards and codebook (default: a temporary one, removed)")
    parser.add_argument("--device", choices=("auto", "cuda", "cpu"), default="auto")
    parser.add_argument("--budget-minutes", type=float, default=DEFAULT_BUDGET_MINUTES,
                        help=f"start no part after this long (default {DEFAULT_BUDGET_MINUTES:g})")  # fmt: skip
    parser.add_argument("--tiny", action="store_true", help="debug sizes and a few steps: the paths, not the figures")
    parser.add_argument(
        "--sections", default=",".join(SECTIONS), help=f"comma-separated subset of {','.join(SECTIONS)}"
    )
    args = parser.parse_args(argv)
    args.sections = [name.strip() for name in args.sections.split(",") if name.strip()]
    unknown = sorted(set(args.sections) - set(SECTIONS))
    if unknown:
        parser.error(f"--sections: unknown {', '.join(unknown)}; choose from {', '.join(SECTIONS)}")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    device, plan = measure.pick_device(args.device), TINY if args.tiny else FULL
    args.out.mkdir(parents=True, exist_ok=True)
    run = Run(args.out, budget_minutes=args.budget_minutes)
    run.results["environment"] = environment(device, plan)
    run.say(f"on {run.results['environment']['summary']}")
    work = Path(args.work) if args.work else Path(tempfile.mkdtemp(prefix="gpu-acceptance-"))
    audio = run_audio(plan, work, run) if set(args.sections) - {"rankme", "profile"} else {}
    for name in SECTIONS[1:]:
        if name in args.sections:
            run_section(name, plan, device, audio, run)
    # This process's own imports: the GPU machines have neither package.
    run.results["imported"] = sorted(module for module in ("ray", "mlflow") if module in sys.modules)
    run.results["problems"] = problems(run.results)
    run.results["compile_speedup"] = compile_speedups(run.results.get("speed", []))
    run.results["total_s"] = time.perf_counter() - run.began
    run.save()
    if not args.work:
        shutil.rmtree(work, ignore_errors=True)
    print(render(run.results))
    return 1 if run.results["problems"] else 0


if __name__ == "__main__":
    sys.exit(main())
