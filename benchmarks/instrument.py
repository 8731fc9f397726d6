"""Measure the instrument before any training recipe: can Q tell a better representation from a random one?

On the default tasks and the study's CPU probe (kNN), for every readout (the encoder layer read
out: the patch embedding, each block, all of them concatenated; pooled over time by the mean, or
by mean and std side by side), it scores:
- the CPU default's encoder (`mae-debug`) at initialisation, one model per `--seeds` seed;
- the positive control (pipeline.evaluate.positive_control): each of those encoders trained
  supervised on the tasks' training clips, so a representation that provably carries the labels;
- the naive features (log-mel mean and std over time; no layers);
- any `--checkpoints` (e.g. a default-study trial's checkpoints), under the same readouts.

Every default task has one fold (train/valid/test), whose test clips the control never sees. Each
score carries the probe's paired test-clip bootstrap (pipeline.evaluate.probes.bootstrap: the same
resampled clips for every source), so a difference between two sources has a 95% interval that
removes the shared luck of the test split; seeds give the spread over initialisations. R is the
RankMe of the probed embedding over the task clips (every split), labelled "R (task audio)": the
study's R uses its pretraining pool, which needs shards this benchmark does not build.

The readout's running statistics (pipeline.rankme.readout_stats): with `--calibration-shards DIR`
(pretraining shards, e.g. HOME/shards/dasheng after a default run) every source is read out as a
study reads it, its statistics re-estimated on DIR's calibration crops (the controls after their
training), and every clip is normalised with DIR's per-bin statistics as the study's input is
(unless `--checkpoints` give theirs). Without it the encoders keep the statistics they have (mean 0 and variance 1 at
initialisation, the task clips' after the control's training) and checkpoints the ones they were
saved with; the output says which.

    python benchmarks/instrument.py --home HOME [--seeds 0,1,2] [--control-steps 700] [--checkpoints DIR]
        [--calibration-shards DIR]

HOME holds the default tasks (`python -m pipeline.corpus tasks` with AUDIOSCALE_HOME=HOME).
Prints one table per readout family and the differences that decide whether Q has headroom.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from q_noise_floor import interval  # noqa: E402

from models import build_model  # noqa: E402
from pipeline.audio.frontend import get_preset  # noqa: E402
from pipeline.evaluate.baselines import naive_splits  # noqa: E402
from pipeline.evaluate.embeddings import FrameEmbedder, MelNormalisation, normalisation_for  # noqa: E402
from pipeline.evaluate.input_cache import model_inputs  # noqa: E402
from pipeline.evaluate.positive_control import ControlConfig, train_positive_control  # noqa: E402
from pipeline.evaluate.probes.knn import KnnProbeConfig  # noqa: E402
from pipeline.evaluate.probes.scene import probe_task, split_arrays  # noqa: E402
from pipeline.evaluate.probes.seeds import fold_test_replicates  # noqa: E402
from pipeline.evaluate.task_jobs import load_embedder  # noqa: E402
from pipeline.rankme.effective_rank import rankme  # noqa: E402
from pipeline.rankme.readout_stats import calibrate_for_readout, calibration_pool  # noqa: E402
from pipeline.storage.bucket_check import without_query  # noqa: E402
from pipeline.storage.checkpoint_copy import local_checkpoint  # noqa: E402
from pipeline.task_format.reader import (  # noqa: E402
    encode_targets,
    list_task_dirs,
    probe_splits,
    read_split_labels,
    read_task_info,
)

MODEL = "mae-debug"  # the CPU default profile's encoder (sweeps.study.grids)
POOLINGS = ("mean", "mean+std")
NAIVE = "naive features"


def pool(frames: np.ndarray, pooling: str) -> np.ndarray:
    """(frames, dim) -> the scene vector: the time mean, or the time mean and std concatenated."""
    if pooling == "mean":
        return frames.mean(axis=0)
    return np.concatenate([frames.mean(axis=0), frames.std(axis=0)])


def layer_frames(embedder: FrameEmbedder, inputs: list[np.ndarray], layers: list[int]) -> dict[int, list]:
    """Frame features of every input at each encoder layer (the model's `embed_layer`, one pass each)."""
    model, out = embedder.model, {}
    original = model.config
    try:
        for layer in layers:
            model.config = dataclasses.replace(original, embed_layer=layer)
            out[layer] = embedder.frame_features_of_inputs(inputs)
    finally:
        model.config = original
    return out


def readout_splits(task, embedder: FrameEmbedder, layers: list[int]) -> dict[tuple, dict]:
    """{(layer label, pooling): {split: SplitArrays}} for one task; "all" concatenates every layer."""
    by_readout: dict[tuple, dict] = {}
    for split in sorted({s for fold in probe_splits(task) for s in (*fold.train, fold.valid, fold.test)}):
        labels = read_split_labels(task, split)
        names = sorted(labels)
        targets = encode_targets(task, [labels[n] for n in names])
        frames = layer_frames(embedder, model_inputs(task, split, names, embedder), layers)
        for pooling in POOLINGS:
            pooled = {layer: np.stack([pool(f, pooling) for f in frames[layer]]) for layer in layers}
            pooled["all"] = np.concatenate([pooled[layer] for layer in layers], axis=1)
            for layer, features in pooled.items():
                by_readout.setdefault((str(layer), pooling), {})[split] = split_arrays(
                    features.astype(np.float32), targets
                )
    return by_readout


def score(task, splits: dict) -> tuple[float, np.ndarray]:
    task_score, results = probe_task(task, splits, seeds=1, training=KnnProbeConfig())
    return task_score.mean, fold_test_replicates(results)


def measure_source(tasks, embedder: FrameEmbedder, layers: list[int]) -> dict[tuple, dict]:
    """{readout: {"q", "draws" (Q per bootstrap replicate), "r", "tasks": {task: score}}} for one model."""
    per_readout: dict[tuple, dict] = {}
    for task in tasks:
        for readout, splits in readout_splits(task, embedder, layers).items():
            entry = per_readout.setdefault(readout, {"tasks": {}, "draws": [], "features": []})
            value, draws = score(task, splits)
            entry["tasks"][task.name] = value
            entry["draws"].append(draws)
            entry["features"].append(np.concatenate([s.features.numpy() for s in splits.values()]))
    for entry in per_readout.values():
        entry["q"] = float(np.mean(list(entry["tasks"].values())))
        entry["draws"] = np.mean(entry["draws"], axis=0)
        # RankMe of the probed embedding (before the probe's own standardisation), all tasks' clips.
        entry["r"] = rankme(np.concatenate(entry.pop("features")).astype(np.float64))
    return per_readout


def naive_source(tasks) -> dict:
    tasks_scores, draws = {}, []
    for task in tasks:
        value, task_draws = score(task, naive_splits(task))
        tasks_scores[task.name] = value
        draws.append(task_draws)
    return {"q": float(np.mean(list(tasks_scores.values()))), "draws": np.mean(draws, axis=0), "tasks": tasks_scores}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--home", type=Path, required=True, help="AUDIOSCALE_HOME with the default tasks built")
    parser.add_argument("--seeds", default="0,1,2", help="initialisation seeds (one encoder and one control each)")
    parser.add_argument("--control-steps", type=int, default=ControlConfig().steps, help="positive control steps")
    parser.add_argument("--checkpoints", default="", help="comma-separated checkpoint directories to score too")
    parser.add_argument("--tasks", default=None, help="comma-separated task names (default: all)")
    parser.add_argument(
        "--calibration-shards", default=None,
        help="pretraining shards whose calibration crops every source's running statistics are re-estimated on",
    )  # fmt: skip
    return parser


def measure_all(args, tasks, log) -> tuple[dict, dict]:
    """({source name: per-readout results}, naive results); sources: init:s, control:s, checkpoints."""
    checkpoints = [c for c in args.checkpoints.split(",") if c]  # folders or bucket URIs
    readout_stats = "calibrated" if args.calibration_shards else "recorded"
    with contextlib.ExitStack() as copies:  # a checkpoint in a bucket is read from a local copy of it
        loaded = [load_embedder(copies.enter_context(local_checkpoint(c)), "cpu", readout_stats=readout_stats,
                                rankme_shards=args.calibration_shards)[0] for c in checkpoints]  # fmt: skip
    normalisation = loaded[0].normalisation if loaded else shard_normalisation(args.calibration_shards)
    sources = {}
    for seed in (int(s) for s in args.seeds.split(",")):
        torch.manual_seed(seed)
        embedder = FrameEmbedder(build_model(MODEL), normalisation=normalisation)
        layers = list(range(embedder.model.config.encoder_depth + 1))
        tick = time.perf_counter()
        calibrate(embedder, args.calibration_shards)
        sources[f"init:{seed}"] = measure_source(tasks, embedder, layers)
        log(f"init seed {seed}: {len(sources[f'init:{seed}'])} readouts in {time.perf_counter() - tick:.0f} s")
        tick = time.perf_counter()
        control = ControlConfig(steps=args.control_steps, seed=seed)
        losses = train_positive_control(embedder, tasks, control, progress=log)
        calibrate(embedder, args.calibration_shards)
        sources[f"control:{seed}"] = measure_source(tasks, embedder, layers)
        log(f"control seed {seed}: loss {np.mean(losses[:7]):.3f} -> {np.mean(losses[-7:]):.3f}, "
            f"trained and measured in {time.perf_counter() - tick:.0f} s")  # fmt: skip
    for given, embedder in zip(checkpoints, loaded):
        layers = list(range(embedder.model.config.encoder_depth + 1))
        trial, _, name = without_query(given).rstrip("/").rpartition("/")
        sources[f"ckpt:{trial.rpartition('/')[2].split('@')[0]}/{name}"] = measure_source(tasks, embedder, layers)
        log(f"checkpoint {without_query(given)} measured")
    return sources, naive_source(tasks)


def shard_normalisation(shards: str | None) -> MelNormalisation | None:
    """One model input for every source: the checkpoints' when given, else the calibration shards'
    per-bin statistics (the input the calibration crops have), else each clip standardised on its own."""
    if not shards:
        return None
    preset = get_preset(build_model(MODEL).spec.frontend_preset)
    return normalisation_for(preset, {"pretrain_config": {"shards_dir": shards}})


def calibrate(embedder: FrameEmbedder, shards: str | None) -> None:
    """Re-estimates the encoder's running statistics on the shards' calibration crops (None: as it is)."""
    if shards:
        pool = calibration_pool(shards, crop_frames=embedder.model.spec.crop_frames)
        calibrate_for_readout(embedder.model, pool, device="cpu")


def spread(values: list[float]) -> str:
    return f"{np.mean(values):.4f} ({min(values):.4f}-{max(values):.4f})" if len(values) > 1 else f"{values[0]:.4f}"


def print_readout_table(sources: dict, seeds: list[str], checkpoints: list[str]) -> None:
    readouts = list(sources[f"init:{seeds[0]}"])
    head = ["readout", "init Q", "control Q", "control - init (seed " + seeds[0] + ")", "init R", "control R"]
    head += [f"{c} Q" for c in checkpoints] + [f"{c} - init" for c in checkpoints]
    print("| " + " | ".join(head) + " |\n|" + "---|" * len(head))
    for readout in readouts:
        init = [sources[f"init:{s}"][readout] for s in seeds]
        control = [sources[f"control:{s}"][readout] for s in seeds]
        cells = [f"layer {readout[0]}, {readout[1]}", spread([e["q"] for e in init]), spread([e["q"] for e in control]),
                 interval(control[0]["draws"] - init[0]["draws"]), spread([e["r"] for e in init]),
                 spread([e["r"] for e in control])]  # fmt: skip
        cells += [f"{sources[c][readout]['q']:.4f}" for c in checkpoints]
        cells += [interval(sources[c][readout]["draws"] - init[0]["draws"]) for c in checkpoints]
        print("| " + " | ".join(cells) + " |")


def print_headroom_per_seed(sources: dict, seeds: list[str]) -> None:
    """control - init of the same seed, per readout: the instrument's criterion asks it on every seed."""
    print("\nHeadroom per seed (control - init of the same seed, paired test-clip 95% interval):")
    for readout in sources[f"init:{seeds[0]}"]:
        cells = [
            f"seed {s} {interval(sources[f'control:{s}'][readout]['draws'] - sources[f'init:{s}'][readout]['draws'])}"
            for s in seeds
        ]
        print(f"- layer {readout[0]}, {readout[1]}: " + "; ".join(cells))


def print_task_table(sources: dict, naive: dict, readout: tuple, seeds: list[str]) -> None:
    names = list(naive["tasks"])
    print(f"\nPer task, readout layer {readout[0]}, {readout[1]} (mean over seeds):")
    print("| source | " + " | ".join(names) + " | Q |\n|" + "---|" * (len(names) + 2))
    for kind in ("init", "control"):
        per_task = [np.mean([sources[f"{kind}:{s}"][readout]["tasks"][n] for s in seeds]) for n in names]
        print(f"| {kind} | " + " | ".join(f"{v:.3f}" for v in per_task) + f" | {np.mean(per_task):.4f} |")
    print(f"| {NAIVE} | " + " | ".join(f"{naive['tasks'][n]:.3f}" for n in names) + f" | {naive['q']:.4f} |")


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    torch.set_num_threads(1)
    started = time.perf_counter()

    def log(line: str) -> None:
        print(f"[instrument {time.perf_counter() - started:5.0f} s] {line}", flush=True)

    names = args.tasks.split(",") if args.tasks else None
    tasks = [read_task_info(d) for d in list_task_dirs(args.home / "tasks", names)]
    log(f"{len(tasks)} tasks; seeds {args.seeds}; control {args.control_steps} steps")
    if args.calibration_shards:
        log(f"readout statistics re-estimated on the calibration crops of {args.calibration_shards}")
    else:
        log("readout statistics as the models have them (no --calibration-shards): init at mean 0 / variance 1")
    sources, naive = measure_all(args, tasks, log)
    seeds = args.seeds.split(",")
    checkpoints = [name for name in sources if name.startswith("ckpt:")]
    print("\n## Q (kNN, mean over tasks) and R (task audio) per readout; seeds: mean (min-max)\n")
    print_readout_table(sources, seeds, checkpoints)
    print_headroom_per_seed(sources, seeds)
    last = str(max(int(layer) for layer, _ in sources[f"init:{seeds[0]}"] if layer != "all"))
    study_readout = sources[f"init:{seeds[0]}"][(last, "mean")]
    print(f"\n{NAIVE}: Q {naive['q']:.4f}; init seed {seeds[0]} (the study's readout: last layer, mean) - naive: "
          f"{interval(study_readout['draws'] - naive['draws'])}")  # fmt: skip
    print_task_table(sources, naive, (last, "mean"), seeds)
    log("done")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
