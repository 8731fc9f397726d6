"""Which small CPU setting makes pretraining improve the pooled representation? (issue #15's research)

Trains candidate settings of the study MAE in this process (the pipeline's optimizer, schedule,
crops, RankMe pool and probes; no Ray, so a setting costs seconds, not a study) and, at log-spaced
checkpoints from initialisation on, measures R (RankMe of the pool's scene embeddings: the R of the
fits) and Q (mean test score over the 7 default tasks with a deterministic probe). Each checkpoint
is scored as a study trial scores it (pipeline.evaluate's embedding and probes); task audio is
decoded once per process (pipeline.evaluate.input_cache; with $AUDIOSCALE_INPUT_CACHE_DIR set,
once per machine, as a study does).

    python benchmarks/sweep_cpu_default.py --home ~/audioscale --settings base,lr1e-3 [--probe knn]

Needs the embedded defaults built (`bash scripts/main.sh` once, or `python -m pipeline.corpus` and
`python -m pipeline.prep`). Prints one row per checkpoint and a summary per setting;
docs/cpu-default-research.md quotes its output.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import re
import sys
import time
from pathlib import Path

import numpy as np
import torch
from scipy import stats

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from models import build_model  # noqa: E402
from pipeline.evaluate.embeddings import FrameEmbedder, MelNormalisation  # noqa: E402
from pipeline.evaluate.probes.scene import probe_task, scene_probe  # noqa: E402
from pipeline.evaluate.probes.seeds import fold_test_replicates  # noqa: E402
from pipeline.evaluate.scores import paired_interval, quality_q, quality_q_replicates  # noqa: E402
from pipeline.evaluate.task_embeddings import embed_task  # noqa: E402
from pipeline.pretrain.optim import build_optimizer, warmup_cosine_factor  # noqa: E402
from pipeline.rankme.model_rankme import measure_pool_rankme  # noqa: E402
from pipeline.rankme.pool import select_pool  # noqa: E402
from pipeline.rankme.readout_stats import calibrated_readout, calibration_pool  # noqa: E402
from pipeline.shards.crops import crop_or_pad  # noqa: E402
from pipeline.shards.format import mel_matrices, read_manifest, read_shard_table  # noqa: E402
from pipeline.task_format.reader import (  # noqa: E402
    list_task_dirs,
    read_task_info,
)
from sweeps.laws.fits import fit_saturating  # noqa: E402


@dataclasses.dataclass(frozen=True)
class Setting:
    overrides: dict = dataclasses.field(default_factory=dict)
    peak_lr: float = 1.9e-5  # today's default: 1.5e-4 x 32 / 256
    steps: int = 100
    batch: int = 32
    warmup_fraction: float = 0.1
    min_lr_ratio: float = 0.0
    weight_decay: float = 0.05
    mask_ratio: float = 0.75
    model: str = "mae-debug"


# A setting is named by its tokens, e.g. "lr1e-3_s2000_m0.9_w128_d4": lr peak lr, s steps, b batch,
# m mask ratio, w/d encoder width/depth (heads = width / 16), wd weight decay, wu warmup fraction,
# min cosine floor, nt0 raw (not per-patch normalised) targets, k=v any other model override.
TOKENS = {"lr": ("peak_lr", float), "s": ("steps", int), "b": ("batch", int), "m": ("mask_ratio", float),
          "wd": ("weight_decay", float), "wu": ("warmup_fraction", float), "min": ("min_lr_ratio", float)}  # fmt: skip


# Model tokens: vc anti-collapse weight, tds / tde teacher decay start / end, ta teacher anneal steps, tk teacher top blocks, dd / dw decoder
# depth / width (decoder heads = width / 16), ul utterance-loss weight.
MODEL_TOKENS = {"vc": ("pooled_vc_weight", float), "ta": ("teacher_anneal_steps", int), "tk": ("teacher_top_blocks", int),
                "tds": ("teacher_decay_start", float), "tde": ("teacher_decay_end", float),
                "dd": ("decoder_depth", int), "dw": ("decoder_dim", int), "ul": ("utterance_loss_weight", float)}  # fmt: skip


def parse_setting(name: str) -> Setting:
    fields, overrides = {}, {}
    for token in name.split("_"):
        if token == "base":
            continue
        if "=" in token:
            key, value = token.split("=", 1)
            overrides[key] = json.loads(value)
        elif token == "nt0":
            overrides["normalize_target_patches"] = False
        elif token == "t":
            fields["model"] = "t-mae-debug"  # the teacher-target objective (models/mae/teacher_targets.py)
        elif match := re.fullmatch(r"(vc|tds|tde|ta|tk|dd|dw|ul)([0-9.e-]+)", token):
            key, kind = MODEL_TOKENS[match[1]]
            overrides[key] = kind(match[2])
        elif match := re.fullmatch(r"([wd])(\d+)", token):
            overrides["encoder_dim" if match[1] == "w" else "encoder_depth"] = int(match[2])
        elif match := re.fullmatch(r"(lr|s|b|m|wd|wu|min)([0-9.e-]+)", token):
            field, kind = TOKENS[match[1]]
            fields[field] = kind(match[2])
        else:
            raise SystemExit(f"setting {name!r}: unknown token {token!r}")
    if "encoder_dim" in overrides:
        overrides["encoder_heads"] = max(1, overrides["encoder_dim"] // 16)
    if "decoder_dim" in overrides:
        overrides["decoder_heads"] = max(1, overrides["decoder_dim"] // 16)
    return Setting(overrides=overrides, **fields)


def measure(model, pool, tasks, normalisation: MelNormalisation, probe_name: str, calibration=None) -> dict:
    """R on the pool and Q over the tasks, as a study trial evaluates (pipeline.evaluate's embedding;
    task inputs from its per-process cache, so only the first checkpoint decodes audio). `calibration`
    (a pool of crops) re-estimates the running statistics for this readout, as a study does; None
    reads out with the statistics training left (the readout before re-estimation). Training goes on
    from its own statistics either way."""
    model.eval()
    tick = time.perf_counter()
    with calibrated_readout(model, calibration, device="cpu"):
        rankme = measure_pool_rankme(model, pool, device="cpu")
        embedder = FrameEmbedder(model, normalisation=normalisation, batch_chunks=256)
        scores, replicates = {}, []
        for task in tasks:
            splits = embed_task(task, embedder).splits
            score, results = probe_task(task, splits, seeds=1, training=scene_probe(probe_name))
            scores[task.name] = score.mean
            replicates.append(fold_test_replicates(results))
    model.train()
    return {
        "R": rankme.value,
        "N": rankme.n,
        "Q": quality_q(scores),
        "tasks": scores,
        "q_replicates": list(quality_q_replicates(replicates)),  # paired with every other checkpoint's
        "eval_s": time.perf_counter() - tick,
    }


def checkpoint_steps(steps: int, count: int = 5) -> list[int]:
    """0, then `count - 1` log-spaced steps ending at `steps`."""
    marks = {0, steps}
    for i in range(1, count - 1):
        marks.add(int(round(steps ** (i / (count - 1)))))
    return sorted(marks)


class TrainingRows:
    """Every training row's normalised log-mel in memory; an epoch is one random crop per row
    (per-bin dataset mean/std and padding with the row's minimum as pipeline.shards.crops, but every
    short row is kept: the pipeline skips rows under half a crop and holds out 1% for validation,
    which moves the loss by ~0.05 and leaves R and Q unchanged: docs/cpu-default-research.md)."""

    def __init__(self, shards: Path, manifest: dict) -> None:
        mean, std = np.asarray(manifest["mean"], np.float32), np.maximum(np.asarray(manifest["std"], np.float32), 1e-5)
        table = read_shard_table(shards, columns=["mel"])
        self.rows = [(mel - mean) / std for mel in mel_matrices(table["mel"], int(manifest["n_mels"]))]

    def epoch_crops(self, crop: int, *, seed: int) -> np.ndarray:
        rng = np.random.default_rng(seed)
        crops = np.stack([crop_or_pad(mel, crop, rng) for mel in self.rows])
        return crops[rng.permutation(len(crops))]


def run_setting(
    name: str,
    setting: Setting,
    *,
    training_rows: TrainingRows,
    pool,
    tasks,
    normalisation,
    probe: str,
    seed: int,
    marks: list[int] | None = None,
    readouts: dict | None = None,
) -> list[dict]:
    """Rows of (setting, seed, readout, step); `readouts` maps a readout's name to its calibration
    pool (None: the statistics training left), each checkpoint measured under every one."""
    readouts = readouts or {"recorded": None}
    torch.manual_seed(seed)
    model = build_model(setting.model, **setting.overrides, mask_ratio=setting.mask_ratio)
    crop = model.spec.crop_frames
    optimizer = build_optimizer(
        model, base_lr=0.0, global_batch_size=setting.batch, weight_decay=setting.weight_decay, peak_lr=setting.peak_lr
    )
    warmup = max(1, int(setting.warmup_fraction * setting.steps))
    marks = marks or checkpoint_steps(setting.steps)
    rows, epoch, crops, losses = [], 0, np.zeros((0,)), []
    started = time.perf_counter()
    for step in range(setting.steps + 1):
        for readout, calibration in readouts.items() if step in marks else ():
            row = {
                "setting": name,
                "seed": seed,
                "readout": readout,
                "step": step,
                "loss": float(np.mean(losses[-10:])) if losses else math.nan,
                **measure(model, pool, tasks, normalisation, probe, calibration),
                "train_s": time.perf_counter() - started,
            }
            rows.append(row)
            print(
                f"{name:>14} {readout:>10} step {step:>5} loss {row['loss']:.3f} R {row['R']:6.2f} Q {row['Q']:.3f} "
                f"[{' '.join(f'{v:.2f}' for v in row['tasks'].values())}] eval {row['eval_s']:.0f}s "
                f"elapsed {row['train_s']:.0f}s",
                flush=True,
            )
        if step == setting.steps:
            break
        if len(crops) < setting.batch:  # a fresh epoch: one random crop per row, shuffled
            crops = training_rows.epoch_crops(crop, seed=seed * 1000 + epoch)
            epoch += 1
        batch, crops = torch.from_numpy(crops[: setting.batch]), crops[setting.batch :]
        for group in optimizer.param_groups:
            group["lr"] = setting.peak_lr * warmup_cosine_factor(
                step, warmup_steps=warmup, total_steps=setting.steps, min_lr_ratio=setting.min_lr_ratio
            )
        loss = model(batch).loss
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        model.after_optimizer_step()  # an EMA teacher follows the new weights (as pipeline.pretrain.loop does)
        losses.append(loss.item())
    return rows


def gain_line(rows: list[dict]) -> str:
    """One setting, seed and readout: each checkpoint's Q - Q(step 0) with its paired 95% interval and
    the gain in units of the paired standard error (the issue's "twice the paired noise floor" is 2)."""
    start = rows[0]
    cells = []
    for row in rows[1:]:
        differences = np.asarray(row["q_replicates"]) - np.asarray(start["q_replicates"])
        low, high = paired_interval(row["q_replicates"], start["q_replicates"])
        gain, se = row["Q"] - start["Q"], differences.std(ddof=1)
        if se == 0:  # every test-clip resample scores the two alike: the same predictions
            cells.append(f"@{row['step']} {gain:+.4f} (identical on every resample)")
            continue
        cells.append(f"@{row['step']} {gain:+.4f} ({low:+.4f}..{high:+.4f}, {gain / se:+.1f} SE)")
    return f"{rows[0]['setting']} seed {rows[0]['seed']} {rows[0]['readout']}: " + "; ".join(cells)


def seed_verdict(rows: list[dict]) -> list[str]:
    """Per setting and readout, over seeds (the verdict's rules, docs/cpu-default-research.md): the last
    checkpoint's gain g = Q(last) - Q(0) with its paired SE per seed; the mean of g with its 95%
    t-interval; how many seeds have g > 2 SE and g > 0; and whether Q rises with R over training
    (Spearman correlation of R and Q over each seed's checkpoints: median, and seeds where positive)."""
    lines = []
    for setting, readout in dict.fromkeys((row["setting"], row["readout"]) for row in rows):
        gains, ses, correlations = [], [], []
        for seed in dict.fromkeys(row["seed"] for row in rows):
            points = sorted((r for r in rows if (r["setting"], r["readout"], r["seed"]) == (setting, readout, seed)),
                            key=lambda r: r["step"])  # fmt: skip
            if len(points) < 2:
                continue
            start, last = points[0], points[-1]
            gains.append(last["Q"] - start["Q"])
            ses.append(float(np.std(np.asarray(last["q_replicates"]) - np.asarray(start["q_replicates"]), ddof=1)))
            correlations.append(stats.spearmanr([r["R"] for r in points], [r["Q"] for r in points]).statistic)
        n, g = len(gains), np.asarray(gains)
        if n < 3:
            lines.append(f"{setting} {readout}: {n} seeds, too few for an interval")
            continue
        half = stats.t.ppf(0.975, n - 1) * g.std(ddof=1) / np.sqrt(n)
        beyond = sum(1 for gain, se in zip(gains, ses, strict=True) if se > 0 and gain > 2 * se)
        positive_r = sum(1 for c in correlations if c > 0)
        lines.append(
            f"{setting} {readout}: last-checkpoint gain over {n} seeds mean {g.mean():+.4f} "
            f"(95% t {g.mean() - half:+.4f}..{g.mean() + half:+.4f}), SD {g.std(ddof=1):.4f}, "
            f"> 2 SE on {beyond}/{n}, > 0 on {int((g > 0).sum())}/{n}; Spearman(R, Q) over training median "
            f"{np.nanmedian(correlations):+.2f}, positive on {positive_r}/{n}; gains "
            + " ".join(f"{gain:+.3f}" for gain in gains)
        )
    return lines


def print_q_of_r_fit(rows: list[dict]) -> None:
    """Q(R) over every point, as the study fits it: span of R, R² and parameters with 95% intervals."""
    r, q = np.array([row["R"] for row in rows]), np.array([row["Q"] for row in rows])
    fit = fit_saturating(r, q, groups=[row["setting"] for row in rows], n_bootstrap=200)
    params = ", ".join(f"{k} {v:.4g} ({fit.ci[k][0]:.4g}-{fit.ci[k][1]:.4g})" for k, v in fit.params.items())
    print(
        f"Q(R) over {len(rows)} points: R {r.min():.2f}-{r.max():.2f} ({r.max() / r.min():.2f}x), "
        f"R² {fit.r2:.3f}; {params}"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--home", type=Path, required=True, help="an $AUDIOSCALE_HOME with the defaults built")
    parser.add_argument("--settings", default="base", help="comma-separated setting names (see TOKENS)")
    parser.add_argument("--probe", default="knn", help="linear | knn (deterministic probes)")
    parser.add_argument(
        "--seeds",
        default="0",
        help="comma-separated training seeds (initial weights, masks, crop order); each setting runs once per seed",
    )
    parser.add_argument(
        "--threads", type=int, default=1, help="torch threads (1: steady when other work shares the cores)"
    )
    parser.add_argument("--json", type=Path, default=None, help="also write every row here")
    parser.add_argument(
        "--summarise",
        type=Path,
        nargs="+",
        default=None,
        help="train nothing: print the seed verdict of rows written by earlier --json runs",
    )
    parser.add_argument(
        "--readouts",
        default="calibrated",
        help="comma-separated: calibrated (running statistics re-estimated on the calibration crops, as a "
        "study reads out) and/or recorded (as training left them); each checkpoint is measured under each",
    )
    parser.add_argument(
        "--checkpoints",
        default=None,
        help="comma-separated steps to measure (default: 0 and 4 log-spaced steps); e.g. the study's "
        "0,21,43,86,129,300",
    )
    parser.add_argument(
        "--fit",
        action="store_true",
        help="fit Q(R) over every measured point (the study's reference fit, settings as bootstrap "
        "units): the settings as one in-process mini-study",
    )
    args = parser.parse_args(argv)
    if args.summarise:
        print("\n".join(seed_verdict([row for path in args.summarise for row in json.loads(path.read_text())])))
        return 0
    torch.set_num_threads(args.threads)
    shards = args.home / "shards" / "dasheng"
    manifest = read_manifest(shards)
    spec = build_model("mae-debug").spec
    normalisation = MelNormalisation(
        per_clip=False,
        bin_mean=np.asarray(manifest["mean"], np.float32),
        bin_std=np.asarray(manifest["std"], np.float32),
    )
    tick = time.perf_counter()
    tasks = [read_task_info(task_dir) for task_dir in list_task_dirs(args.home / "tasks")]
    pool = select_pool(shards, crop_frames=spec.crop_frames)
    training_rows = TrainingRows(shards, manifest)
    print(
        f"pool N {sum(k for _, k in pool.rows)}, training rows read in {time.perf_counter() - tick:.0f} s", flush=True
    )
    calibration = calibration_pool(str(shards), crop_frames=spec.crop_frames)
    readouts = {name: calibration if name == "calibrated" else None for name in args.readouts.split(",")}
    if set(readouts) - {"calibrated", "recorded"}:
        raise SystemExit(f"--readouts: calibrated and/or recorded, got {args.readouts!r}")
    rows, gains = [], []
    for name in args.settings.split(","):
        for seed in (int(s) for s in args.seeds.split(",")):
            setting_rows = run_setting(
                name,
                parse_setting(name),
                training_rows=training_rows,
                pool=pool,
                tasks=tasks,
                normalisation=normalisation,
                probe=args.probe,
                seed=seed,
                marks=[int(s) for s in args.checkpoints.split(",")] if args.checkpoints else None,
                readouts=readouts,
            )
            for readout in readouts:
                gains.append(gain_line([row for row in setting_rows if row["readout"] == readout]))
                print(gains[-1], flush=True)
            rows += setting_rows
    print("\nQ - Q(initialisation) per setting and seed (paired test-clip 95% interval, gain / paired SE):")
    print("\n".join(gains))
    print("\nThe seed verdict:")
    print("\n".join(seed_verdict(rows)))
    if args.fit:
        print_q_of_r_fit([row for row in rows if row["readout"] == next(iter(readouts))])
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
