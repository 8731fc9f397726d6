"""`python -m sweeps.advise`: what to train with a budget, from a finished size x data-volume study.

    python -m sweeps.advise --study NAME --budget 1e21
    python -m sweeps.advise --study NAME --gpu-hours 500 --gpu h100 --mfu 0.4 --holdout largest

Fits the study's Q(N, D), maximises it along the budget's iso-compute curve and prints N, D and the
predicted Q with 95% intervals, the local allocation exponents, how far the budget extrapolates,
and the GPU-hours of training it on the given GPU (`--plan`'s arithmetic, sweeps.study.cost).
`--holdout largest` refits without the largest-compute trials and reports how well it predicts
them. The answer lands on the study's MLflow run (metrics `advise.*`, the figure and the lines as
artifacts under `advise/`). Where the fit cannot carry an answer it refuses in one line
(sweeps.report.advice).
"""

from __future__ import annotations

import dataclasses
import math
import tempfile
from pathlib import Path

from pipeline.cli.command import Command
from pipeline.cli.errors import UserError
from pipeline.cli.flags import flag
from pipeline.tracking import runs as tracking
from sweeps.record.study import read_study
from sweeps.report.advice import Advice, AdviceRefused, advice_lines, advise, holdout_check, holdout_lines
from sweeps.report.advice_figure import iso_compute_figure
from sweeps.study.cost import (
    DEFAULT_GPU,
    DEFAULT_GPUS,
    DEFAULT_MFU,
    GPU_PEAK_BF16_TFLOPS,
    CostAssumptions,
    gpu_hours_for,
)

COMMAND = Command("sweeps.advise", __doc__.split("\n\n")[0])


@dataclasses.dataclass(frozen=True, kw_only=True)
class AdviseCommandConfig:
    study: str = flag("--study", None, "a finished study with a size x data_volume grid", required=True)
    # The budget: exactly one of the two.
    budget: float | None = flag("--budget", None, "training FLOPs to spend", one_of="budget")
    gpu_hours: float | None = flag("--gpu-hours", None, "GPU-hours to spend (on --gpu at --mfu)", one_of="budget")
    gpu: str = flag("--gpu", DEFAULT_GPU, "the GPU the hours are on", choices=sorted(GPU_PEAK_BF16_TFLOPS))
    mfu: float = flag("--mfu", DEFAULT_MFU, "model FLOPs utilisation")
    gpus: int = flag("--gpus", DEFAULT_GPUS, "GPUs the training would run on (wall time)")
    holdout: str | None = flag(
        "--holdout", None, "largest: refit without the largest-compute trials and predict them", choices=["largest"]
    )
    n_bootstrap: int = flag("--n-bootstrap", 200, "bootstrap refits behind the intervals")
    tracking_uri: str | None = flag("--tracking-uri", None, "MLflow store (default: the embedded SQLite file)")


def budget_flops(config: AdviseCommandConfig, assumptions: CostAssumptions) -> float:
    flops = (
        config.budget
        if config.budget is not None
        else config.gpu_hours * 3600.0 * assumptions.peak_flops_per_s * assumptions.mfu
    )
    if not math.isfinite(flops) or flops <= 0:
        given = f"--budget {config.budget:g}" if config.budget is not None else f"--gpu-hours {config.gpu_hours:g}"
        raise UserError(
            f"{given}: the budget must be a positive, finite number (FLOPs for --budget, hours for --gpu-hours)"
        )
    return flops


def cost_line(advice: Advice, assumptions: CostAssumptions) -> str:
    hours = gpu_hours_for(advice.budget_flops, assumptions)
    return (
        f"training it: {hours:,.1f} GPU-hours on {assumptions.gpu} at {assumptions.mfu:.0%} MFU "
        f"({hours / assumptions.gpus:,.1f} h of wall time on {assumptions.gpus} GPUs)"
    )


def log_advice(run: tracking.TrackedRun, advice: Advice, lines: list[str]) -> None:
    """Metrics `advise.*` (with their 95% bounds), the budget as a tag, the figure and the lines."""
    metrics = {"advise.budget_flops": advice.budget_flops, "advise.extrapolation": advice.extrapolation}
    for name, interval in (("n_opt", advice.n_params), ("d_opt_hours", advice.hours), ("q_opt", advice.q),
                           ("exponent_n", advice.exponent_n), ("exponent_d", advice.exponent_d)):  # fmt: skip
        metrics.update({f"advise.{name}": interval.value, f"advise.{name}_ci_low": interval.low,
                        f"advise.{name}_ci_high": interval.high})  # fmt: skip
    run.log_metrics({key: value for key, value in metrics.items() if math.isfinite(value)}, step=0)
    run.set_tags({"advise.budget_flops": f"{advice.budget_flops:.6g}"})
    with tempfile.TemporaryDirectory() as folder:
        stem = f"advice_{advice.budget_flops:.3g}"
        (Path(folder) / f"{stem}.txt").write_text("\n".join(lines) + "\n")
        run.log_artifact(Path(folder) / f"{stem}.txt", artifact_path="advise")
        run.log_artifact(iso_compute_figure(advice, Path(folder) / f"{stem}.png"), artifact_path="advise")


def main(argv: list[str] | None = None) -> int:
    config, _ = COMMAND.parse(AdviseCommandConfig, argv)
    assumptions = CostAssumptions(gpu=config.gpu, mfu=config.mfu, gpus=config.gpus)
    budget = budget_flops(config, assumptions)
    study = read_study(tracking.checked_store(config.tracking_uri), config.study)  # a dead server: one line, now
    # The held-out check says how far the law predicts, which matters most when it cannot advise.
    holdout, holdout_note = None, ""
    if config.holdout:
        try:
            holdout = holdout_check(study.trial_table, n_bootstrap=config.n_bootstrap)
        except AdviceRefused as refusal:
            holdout_note = f"held-out check: not possible: {refusal}"
    try:
        advice = advise(study.trial_table, budget, n_bootstrap=config.n_bootstrap)
    except AdviceRefused as refusal:
        print("\n".join([*holdout_lines(holdout), *([holdout_note] if holdout_note else [])]))
        study.run.set_tags({"advise.refused": str(refusal)[:4000]})
        raise UserError(f"sweeps.advise --study {config.study}: no advice: {refusal}") from refusal
    lines = [*advice_lines(advice, holdout), *([holdout_note] if holdout_note else []), cost_line(advice, assumptions)]
    print("\n".join(lines))
    log_advice(study.run, advice, lines)
    return 0


def cli() -> int:
    """`python -m` and the console script: user errors one line, exit code 2 (pipeline.cli.command)."""
    return COMMAND.run(main)


if __name__ == "__main__":
    raise SystemExit(cli())
