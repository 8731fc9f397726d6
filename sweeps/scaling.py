"""`python -m sweeps.scaling`: run a scaling study on Ray Tune and fit its laws.

    python -m sweeps.scaling --grid mask_ratio              (CPU default: a small real study)
    python -m sweeps.scaling --grid size,data_volume --profile paper --gpus-per-trial 1 \\
        --max-concurrent 8 --address auto
    python -m sweeps.scaling --grid mask_ratio --resume     (continue an interrupted study)
    python -m sweeps.scaling --config sweeps/recipes/cpu_default.toml --probe quick
                                                 (a recipe file of settings; the flags override it)
    python -m sweeps.scaling --grid mask_ratio --rankme-early-stop   (stop low-RankMe trials early)
    python -m sweeps.scaling --grid size --profile paper --plan      (print each trial's configuration)
    python -m sweeps.scaling --grid size --profile paper --plan --gpu h100 --mfu 0.4 --gpus 64
                                                 (and what it costs: GPU-hours, wall time, storage)

Each trial pretrains and evaluates one grid point; the study is one MLflow parent run with a
child run per trial, and ends with the fitted laws, figures and a report logged to the parent.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

from pipeline.cli.command import Command
from pipeline.cli.flags import add_flags, config_from_flags, flag
from sweeps.protocol.early_stop_rule import (
    DEFAULT_KEEP_FRACTION,
    decision_step_for,
    n_trials_kept,
    planned_steps_saved_fraction,
)
from sweeps.study.closing import closing_lines
from sweeps.study.config import CONFIG_TABLES, StudyConfig
from sweeps.study.cost import (
    DEFAULT_GPU,
    DEFAULT_GPUS,
    DEFAULT_MFU,
    GPU_PEAK_BF16_TFLOPS,
    CostAssumptions,
)
from sweeps.study.driver import run_study
from sweeps.study.grids import expand_grids
from sweeps.study.phase_times import install_seconds, phase_line
from sweeps.study.plan import plan_text


def default_grid_saving() -> str:
    """What the default early-stop rule saves on the default grid, worked out (for --help)."""
    trials = expand_grids("mask_ratio", profile="cpu_default")
    steps = trials[0].train_steps
    saved = planned_steps_saved_fraction(len(trials), steps)
    return (
        f"Defaults on the CPU mask_ratio grid ({len(trials)} trials of {steps} steps): keep "
        f"{n_trials_kept(len(trials), DEFAULT_KEEP_FRACTION)} at step {decision_step_for(steps)}, "
        f"saving {100 * saved:.0f}% of the planned steps"
    )


COMMAND = Command("sweeps.scaling", __doc__.split("\n\n")[0])


@dataclasses.dataclass(frozen=True, kw_only=True)
class PlanFlags:
    """`--plan` and the hardware it prices the study on (sweeps.study.cost); None: the default."""

    plan: bool = flag(
        "--plan", False,
        "print each trial's resolved configuration and cost, and the study's total, and exit (runs nothing)",
    )  # fmt: skip
    gpu: str | None = flag(
        "--gpu", None, f"with --plan: the GPU, one of {', '.join(GPU_PEAK_BF16_TFLOPS)} (its dense bf16 peak; "
        f"default: {DEFAULT_GPU})",
    )  # fmt: skip
    mfu: float | None = flag("--mfu", None, f"with --plan: model FLOPs utilisation in (0, 1] (default: {DEFAULT_MFU})")
    gpus: int | None = flag("--gpus", None, f"with --plan: GPUs the trials share (default: {DEFAULT_GPUS})")

    def cost_assumptions(self) -> CostAssumptions:
        given = {"gpu": self.gpu, "mfu": self.mfu, "gpus": self.gpus}
        if not self.plan and any(value is not None for value in given.values()):
            raise ValueError("--gpu, --mfu and --gpus price a plan; add --plan (they change nothing in a run)")
        return CostAssumptions(**{name: value for name, value in given.items() if value is not None})


def build_parser() -> argparse.ArgumentParser:
    """One option per StudyConfig field, sections included (pipeline.cli.flags); --config; --plan and its costs."""
    parser = COMMAND.parser(
        StudyConfig,
        help_values={"early_stop_saving": default_grid_saving().replace("%", "%%")},
        config_file_tables=CONFIG_TABLES,
        description=__doc__,
    )
    parser.formatter_class = argparse.RawDescriptionHelpFormatter  # the usage examples keep their lines
    add_flags(parser, PlanFlags)
    return parser


def parse_study_args(argv: list[str] | None) -> tuple[StudyConfig, PlanFlags]:
    """The study's config (a --config recipe, then the flags over it), and --plan with its costs."""
    config, namespace = COMMAND.parse(StudyConfig, argv, parser=build_parser(), table="study")
    return config, config_from_flags(PlanFlags, namespace)


def main(argv: list[str] | None = None) -> int:
    """The command (and the `audioscale-study` script): user errors are one line, exit code 2."""
    return COMMAND.run(run_command, argv)


def run_command(argv: list[str]) -> int:
    config, plan = parse_study_args(argv)  # the config checks its values (ValueError: one line, by run_cli)
    if plan.plan:  # the resolved recipe and cost of every trial (sweeps.study.plan); no Ray, no MLflow
        print(
            plan_text(
                config.grid,
                config.profile,
                eval_checkpoints=config.evaluate.eval_checkpoints,
                context_batch=config.pretrain.global_batch_size,
                assumptions=plan.cost_assumptions(),
                objective=config.objective,
                probe=config.resolved_probe,
                train_seeds=config.train_seeds,
            )
        )
        return 0
    plan.cost_assumptions()  # refuses the cost flags without --plan
    outcome = run_study(config)  # a default that cannot be built here is a UserError: one line, exit 2
    print(outcome.report_markdown)
    uri = outcome.tracking_uri
    # `mlflow` is installed beside this Python (the venv's bin), not necessarily on PATH.
    print("\n".join(closing_lines(outcome, tracking_uri=uri, bin_dir=Path(sys.executable).parent)))
    # Apart from the closing lines, which a rerun reproduces to the digit: where this run's time went.
    print(phase_line(outcome.phase_seconds, install_seconds(), outcome.phase_beside))
    return 1 if outcome.trials_failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
