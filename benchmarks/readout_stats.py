"""What the readout's running statistics alone do to R and Q, measured in the pipeline.

Each seed is a CPU-default study trial (the study MAE at width 128 with the anti-collapse term, the
profile's recipe, crops, checkpoints and kNN probe) pretrained on Ray Train with `--peak-lr 0`: no
weight changes, only the input BatchNorm's running statistics follow the crops. Every checkpoint is
then evaluated as a study evaluates it (`pipeline.evaluate.run.evaluate_checkpoint`), under both
readouts (pipeline.evaluate.readout_calibration):
- recorded: the statistics as saved (the readout before re-estimation);
- calibrated: re-estimated on the study's calibration crops (the readout every study now uses).
A fair readout gives every checkpoint of such a trial the Q and R of its step 0.

    python benchmarks/readout_stats.py --home HOME --seeds 200,201,202,203,204,205,206,207

HOME holds the embedded defaults (`bash scripts/main.sh` once). `--calibration-sizes 1024,4096`
also scores the first seed's step 0 with calibration sets of those sizes (how many crops are enough).
Prints one line per seed and readout and a summary per checkpoint; docs/cpu-default-research.md
quotes it.
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from scipy import stats

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pipeline.evaluate.probes.scene import scene_probe  # noqa: E402
from pipeline.evaluate.run import evaluate_checkpoint  # noqa: E402
from pipeline.pretrain.driver import PretrainConfig, run_pretraining  # noqa: E402
from pipeline.rankme import readout_stats  # noqa: E402
from sweeps.protocol.early_stop_rule import checkpoint_every_steps_for  # noqa: E402
from sweeps.protocol.recipe import evaluation_steps_for, trial_overrides  # noqa: E402
from sweeps.study.grids import BASE_TRIALS  # noqa: E402

READOUTS = ("recorded", "calibrated")


def frozen_trial_config(home: Path, seed: int, work: Path) -> PretrainConfig:
    """The CPU default's base trial as a study runs it (its recipe, checkpoints and RankMe steps), at peak lr 0."""
    base = BASE_TRIALS["cpu_default"]
    recipe = trial_overrides("cpu_default", train_steps=base.train_steps, hours=None, context_batch=32,
                             model_name=base.model_name)  # fmt: skip
    recipe["peak_lr"] = 0.0  # every weight stays as initialised: only running statistics move
    return PretrainConfig.from_flat(
        model_name=base.model_name, model_overrides=dict(base.model_overrides), **recipe,
        seed=seed, steps=base.train_steps, num_workers=1, cpus_per_worker=1,
        shards_dir=str(home / "shards" / "dasheng"), run_name=f"frozen-{seed}",
        storage_path=str(work / "ray_results"), tracking_uri=f"sqlite:///{work / 'mlflow.db'}",
        checkpoint_every_steps=checkpoint_every_steps_for(base.train_steps),
        checkpoint_steps=evaluation_steps_for(base.train_steps, "all"),
    )  # fmt: skip


def evaluate(checkpoint: str, home: Path, readout: str) -> dict:
    result = evaluate_checkpoint(checkpoint, tasks_dir=home / "tasks", probe_training=scene_probe("knn"),
                                 readout_stats=readout)  # fmt: skip
    return {"step": result.step, "R": result.rankme, "Q": result.q, "replicates": np.asarray(result.q_replicates)}


def drift_cells(points: list[dict]) -> list[tuple[int, float, float, float]]:
    """(step, Q - Q0, its paired SE, R - R0) for each checkpoint after step 0."""
    start = points[0]
    cells = []
    for point in points[1:]:
        difference = point["replicates"] - start["replicates"]
        cells.append((point["step"], point["Q"] - start["Q"], float(difference.std(ddof=1)), point["R"] - start["R"]))
    return cells


def describe(cell: tuple[int, float, float, float]) -> str:
    step, gain, se, r_drift = cell
    if se == 0:
        return f"@{step} Q {gain:+.4f} (identical) R {r_drift:+.2f}"
    return f"@{step} Q {gain:+.4f} ({gain / se:+.1f} SE of {se:.5f}) R {r_drift:+.2f}"


def summary(readout: str, per_seed: list[list[tuple]]) -> None:
    """Per checkpoint over seeds: mean drift with its 95% t-interval, the spread, and the count beyond 2 SE."""
    n = len(per_seed)
    print(f"\n{readout}: Q - Q(step 0) and R - R(step 0) over {n} seeds")
    common = sorted(set.intersection(*({cell[0] for cell in cells} for cells in per_seed))) if per_seed else []
    for step in common:
        column = [next(cell for cell in cells if cell[0] == step) for cells in per_seed]
        gains = np.array([cell[1] for cell in column])
        beyond = sum(1 for cell in column if cell[2] > 0 and abs(cell[1]) > 2 * cell[2])
        r = np.array([cell[3] for cell in column])
        if n > 2:
            half = stats.t.ppf(0.975, n - 1) * gains.std(ddof=1) / np.sqrt(n)
            interval = f"95% t {gains.mean() - half:+.4f}..{gains.mean() + half:+.4f}"
        else:
            interval = f"no interval from {n} seeds"
        print(f"  step {step:>3}: Q mean {gains.mean():+.4f} ({interval}), "
              f"SD {gains.std(ddof=1):.4f}, mean |drift| {np.abs(gains).mean():.4f}, max {np.abs(gains).max():.4f}, "
              f"|drift| > 2 SE on {beyond}/{n}; R mean {r.mean():+.2f}, max |R drift| {np.abs(r).max():.2f}")  # fmt: skip


# "(+2.0 SE of 0.00410)"; lines printed before the SE itself was ("(+2.0 SE)") give it back only to the
# rounding of their ratio, so a drift near 2 SE may be counted on the wrong side there.
CELL = re.compile(r"@(\d+) Q ([+-][\d.]+) \((?:identical|([+-][\d.]+) SE(?: of ([\d.]+))?)\) R ([+-][\d.]+)")


def cells_of_line(line: str) -> tuple[str, list[tuple]] | None:
    """(readout, cells) of one printed seed line (what `describe` wrote; SE rebuilt from gain / (gain/SE))."""
    head, _, body = line.partition(": ")
    body = body.split("; ", 1)[1] if body.startswith("step 0 ") else body
    if not head.startswith("seed ") or not body.startswith("@"):
        return None
    cells = []
    for step, gain, in_se, printed_se, r_drift in CELL.findall(body):
        gain = float(gain)
        if printed_se:
            se = float(printed_se)
        else:
            se = 0.0 if not in_se else (abs(gain / float(in_se)) if float(in_se) else float("nan"))
        cells.append((int(step), gain, se, float(r_drift)))
    return head.split()[-1], cells


def print_cost(home: Path, repeats: int = 3) -> None:
    """What re-estimation adds to one readout: the calibration pass next to the pool's RankMe, side by
    side on the CPU default's model and shards (medians of `repeats`, this process's threads)."""
    import statistics

    import torch

    from models import build_model
    from pipeline.rankme.model_rankme import measure_pool_rankme
    from pipeline.rankme.pool import select_pool

    base = BASE_TRIALS["cpu_default"]
    model = build_model(base.model_name, **base.model_overrides)
    shards = str(home / "shards" / "dasheng")
    pool = select_pool(shards, crop_frames=model.spec.crop_frames)

    def seconds(work) -> float:
        timings = []
        for _ in range(repeats):
            tick = time.perf_counter()
            work()
            timings.append(time.perf_counter() - tick)
        return statistics.median(timings)

    calibrate = seconds(lambda: readout_stats.calibrate_for_readout(
        model, readout_stats.calibration_pool(shards, crop_frames=model.spec.crop_frames), device="cpu"))  # fmt: skip
    rankme = seconds(lambda: measure_pool_rankme(model, pool, device="cpu"))
    print(f"cost, {torch.get_num_threads()} threads, median of {repeats}: calibration ({readout_stats.CALIBRATION_CROPS} "
          f"crops, selection included) {calibrate:.2f} s; RankMe of the pool ({pool.n} crops) {rankme:.2f} s; "
          f"ratio {calibrate / rankme:.2f}", flush=True)  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--home", type=Path, required=True, help="an $AUDIOSCALE_HOME with the defaults built")
    parser.add_argument("--seeds", default="200,201,202,203,204,205,206,207", help="comma-separated trial seeds")
    parser.add_argument("--summarise-logs", type=Path, nargs="+", default=None,
                        help="run nothing: summarise the seed lines these earlier outputs printed")  # fmt: skip
    parser.add_argument("--cost", action="store_true", help="only time the calibration pass against the pool's RankMe")
    parser.add_argument("--every-step", action="store_true", help="the calibrated readout at every checkpoint too")
    parser.add_argument("--calibration-sizes", default="", help="e.g. 1024,4096: step 0 calibrated on that many crops")
    args = parser.parse_args(argv)
    if args.summarise_logs:  # combine the seed lines of earlier runs (e.g. seeds split over two processes)
        parsed: dict[str, list] = {readout: [] for readout in READOUTS}
        for path in args.summarise_logs:
            for line in path.read_text().splitlines():
                if (found := cells_of_line(line)) is not None:
                    parsed[found[0]].append(found[1])
        for readout in READOUTS:
            summary(readout, parsed[readout])
        return 0
    if args.cost:
        print_cost(args.home)
        return 0
    seeds = [int(seed) for seed in args.seeds.split(",")]
    drifts: dict[str, list] = {readout: [] for readout in READOUTS}
    with tempfile.TemporaryDirectory(prefix="readout-stats-") as scratch:
        for index, seed in enumerate(seeds):
            tick = time.perf_counter()
            result = run_pretraining(frozen_trial_config(args.home, seed, Path(scratch)))
            trained = time.perf_counter() - tick
            # the checkpoints a study trial evaluates (not the periodic ones kept for resuming)
            wanted = {*evaluation_steps_for(result.steps, "all"), result.steps}
            checkpoints = [path for step, path in sorted(result.checkpoints) if step in wanted]
            for readout in READOUTS:
                # Calibrated, equal weights give equal readouts at every step (tests/pipeline/evaluate/
                # test_readout_calibration.py): step 0 and the last step show it here at half the cost.
                paths = (
                    checkpoints if readout == "recorded" or args.every_step else checkpoints[:: len(checkpoints) - 1]
                )
                points = [evaluate(path, args.home, readout) for path in paths]
                cells = drift_cells(points)
                drifts[readout].append(cells)
                start = f"step 0 R {points[0]['R']:.3f} Q {points[0]['Q']:.4f}; "
                print(f"seed {seed} {readout:>10}: {start}" + "; ".join(describe(cell) for cell in cells), flush=True)
            shipped = readout_stats.CALIBRATION_CROPS
            for size in [int(s) for s in args.calibration_sizes.split(",") if s] if index == 0 else ():
                readout_stats.CALIBRATION_CROPS = size  # read at call time by calibration_pool
                point = evaluate(checkpoints[0], args.home, "calibrated")
                print(
                    f"seed {seed} step 0 calibrated on {size} crops: R {point['R']:.3f} Q {point['Q']:.4f}", flush=True
                )
            readout_stats.CALIBRATION_CROPS = shipped
            left = (time.perf_counter() - tick) * (len(seeds) - index - 1)
            print(
                f"[{index + 1}/{len(seeds)} seeds, training {trained:.0f} s, about {left / 60:.0f} min left]",
                flush=True,
            )
    for readout in READOUTS:
        summary(readout, drifts[readout])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
