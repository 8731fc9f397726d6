"""Does bf16 autocast (or fused AdamW) change where training goes, beyond what a different seed changes?

The acceptance check (benchmarks/acceptance/correctness.py) compares 5 steps at lr 1e-3 from the same
weights; in Adam's first steps every weight moves by about +-lr whatever the size of its gradient, so a
rounding-level difference in a near-zero gradient flips a whole step and two curves can part by several
per cent at step 3-4 and meet again at step 5. That says little about whether a precision changes a run.
This benchmark asks the question a run asks: per seed, train the reference (fp32, plain AdamW) and the
setting from the same weights, masks and batches for `--steps` steps at the product's own lr and warmup,
and compare the mean loss of the last `--window` steps.

Criterion, fixed before any run: the setting passes when the mean over seeds of |window mean(setting) -
window mean(reference)| is at most the standard deviation across seeds of the reference's window mean
(the seed-to-seed spread: what choosing another seed already moves). Three seeds by default; the verdict
says "not informative" when the spread is zero (nothing to compare against).

  python benchmarks/precision_drift.py axlstm-base:bf16 wav2vec2-base:fused          # a GPU, ~2 minutes
  python benchmarks/precision_drift.py axlstm-debug:bf16 --device cpu --steps 12 --window 4 --batch 4
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

import torch  # noqa: E402

from benchmarks.acceptance import training  # noqa: E402
from benchmarks.acceptance.correctness import without_dropout  # noqa: E402

SETTINGS = {"bf16": {"precision": "bf16"}, "fused": {"fused_adamw": True}}
REFERENCE = {"precision": "fp32", "fused_adamw": False}


def loss_curve(model: str, device: torch.device, *, seed: int, steps: int, batch: int, pool: int,
               precision: str, fused_adamw: bool) -> list[float]:  # fmt: skip
    """`steps` losses of one run at the product's lr; the batches cycle through a seeded pool of `pool`
    random log-mel batches, so the run can fit them and the loss falls (equal for every setting of one seed)."""
    run = training.build(model, device, global_batch=batch, steps=steps, precision=precision, fused_adamw=fused_adamw,
                         peak_lr=None, overrides=without_dropout(model, {}), warmup_steps=max(1, steps // 10),
                         seed=seed)  # fmt: skip
    batches = [training.random_log_mel(run.model, batch, device, seed=seed * 1000 + index) for index in range(pool)]
    return [training.step(run, iter([batches[(step - 1) % pool]]), step) for step in range(1, steps + 1)]


def compare(model: str, setting: str, device: torch.device, *, seeds: int, steps: int, window: int,
            batch: int, pool: int, say) -> dict:  # fmt: skip
    reference_means, setting_means, gaps = [], [], []
    for seed in range(1, seeds + 1):
        started = time.perf_counter()
        reference = loss_curve(model, device, seed=seed, steps=steps, batch=batch, pool=pool, **REFERENCE)
        compared = loss_curve(model, device, seed=seed, steps=steps, batch=batch, pool=pool,
                              **{**REFERENCE, **SETTINGS[setting]})  # fmt: skip
        reference_mean, setting_mean = statistics.fmean(reference[-window:]), statistics.fmean(compared[-window:])
        reference_means.append(reference_mean)
        setting_means.append(setting_mean)
        gaps.append(abs(setting_mean - reference_mean))
        say(f"{model} {setting} seed {seed}: loss {reference[0]:.4f} -> window {reference_mean:.4f} (fp32), "
            f"{compared[0]:.4f} -> {setting_mean:.4f} ({setting}); gap {gaps[-1]:.4f} "
            f"({time.perf_counter() - started:.1f} s)")  # fmt: skip
    spread = statistics.stdev(reference_means) if seeds > 1 else 0.0
    mean_gap = statistics.fmean(gaps)
    verdict = "not informative (no seed spread)" if spread == 0 else (
        "within the seed spread" if mean_gap <= spread else "outside the seed spread")  # fmt: skip
    return {"model": model, "setting": setting, "steps": steps, "window": window, "batch": batch,
            "reference_window_means": reference_means, "setting_window_means": setting_means,
            "mean_gap": mean_gap, "seed_spread": spread, "verdict": verdict}  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("pairs", nargs="+", help="MODEL:SETTING, SETTING one of " + ", ".join(SETTINGS))
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--window", type=int, default=20)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--pool", type=int, default=4, help="distinct batches cycled through")
    parser.add_argument("--out", type=Path, help="write the rows as JSON here")
    args = parser.parse_args(argv)
    if not 1 <= args.window <= args.steps:
        parser.error(f"--window {args.window} must lie in 1..--steps ({args.steps})")
    device = torch.device(args.device)
    rows = []
    for pair in args.pairs:
        model, _, setting = pair.partition(":")
        if setting not in SETTINGS:
            parser.error(f"{pair!r}: give MODEL:SETTING with SETTING one of {', '.join(SETTINGS)}")
        row = compare(model, setting, device, seeds=args.seeds, steps=args.steps, window=args.window,
                      batch=args.batch, pool=args.pool, say=lambda line: print(line, file=sys.stderr, flush=True))  # fmt: skip
        rows.append(row)
        if args.out:
            args.out.write_text(json.dumps(rows, indent=1))
    for row in rows:
        print(f"{row['model']:<16} {row['setting']:<6} mean |gap| {row['mean_gap']:.4f} over {args.seeds} seeds, "
              f"seed spread (SD) {row['seed_spread']:.4f}: {row['verdict']}")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
