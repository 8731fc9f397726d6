"""`python -m sweeps.scaling`: run a scaling study on Ray Tune and fit its laws.

    python -m sweeps.scaling --grid mask_ratio              (CPU default: a small real study)
    python -m sweeps.scaling --grid size,data_volume --profile paper --gpus-per-trial 1 \\
        --max-concurrent 8 --address auto
    python -m sweeps.scaling --grid mask_ratio --resume     (continue an interrupted study)
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

from pipeline.cli_errors import run_cli
from pipeline.corpus.sources.build_marker import OutputDirectoryError
from pipeline.corpus.sources.debian import MissingPackagesError
from pipeline.evaluate.probes.scene import SCENE_PROBES
from pipeline.tracking import runs as tracking
from sweeps.protocol.early_stop_rule import (
    DEFAULT_KEEP_FRACTION,
    decision_step_for,
    n_trials_kept,
    planned_steps_saved_fraction,
)
from sweeps.protocol.recipe import EVAL_CHECKPOINTS
from sweeps.study.closing import closing_lines
from sweeps.study.config import StudyConfig
from sweeps.study.cost import (
    DEFAULT_GPU,
    DEFAULT_GPUS,
    DEFAULT_MFU,
    GPU_PEAK_BF16_TFLOPS,
    CostAssumptions,
)
from sweeps.study.driver import run_study
from sweeps.study.grids import GRIDS, PROFILES, expand_grids
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


def _add_evaluation_flags(parser: argparse.ArgumentParser, d: dict) -> None:
    """How each trial is scored, and what the study prints."""
    parser.add_argument(
        "--eval-checkpoints",
        choices=list(EVAL_CHECKPOINTS),
        default=d["eval_checkpoints"],
        help="checkpoints each trial evaluates: all (initialisation, Table III's RankMe steps, the last: Q(R) "
        "over checkpoints as the paper's Fig. 1a) or final (default: the profile's, all for cpu_default)",
    )
    parser.add_argument("--quiet", action="store_true", help="no progress lines while the study runs")
    parser.add_argument("--n-bootstrap", type=int, default=d["n_bootstrap"], help="bootstrap resamples per law")
    parser.add_argument(
        "--probe",
        choices=list(SCENE_PROBES),
        default=d["probe"],
        help="scene probe that scores every trial (see python -m pipeline.evaluate --help); recorded on the study "
        "run, and Q compares only within one probe (default: the profile's: knn for cpu_default, hear for paper)",
    )


def build_parser() -> argparse.ArgumentParser:
    d = {field.name: field.default for field in dataclasses.fields(StudyConfig)}  # StudyConfig's defaults
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--grid", required=True, help=f"one of {sorted(GRIDS)}, or several comma-separated")
    parser.add_argument("--profile", choices=PROFILES, default=d["profile"], help="grid values (default: %(default)s)")
    parser.add_argument("--study", default=None, help="study name (default: <grid>-<profile>)")
    parser.add_argument("--resume", action="store_true", help="continue a study: finished trials are not re-run")
    parser.add_argument("--gpus-per-trial", type=float, default=d["gpus_per_trial"])
    parser.add_argument(
        "--cpus-per-trial", type=float, default=d["cpus_per_trial"], help="for the trial driver process itself"
    )
    parser.add_argument("--max-concurrent", type=int, default=None, help="trials at once (default: as resources allow)")
    parser.add_argument("--address", default=None, help="Ray cluster address (default: start a local Ray)")
    parser.add_argument("--tracking-uri", default=None, help="MLflow store (default: the embedded SQLite file)")
    parser.add_argument("--corpus", default=None, help="pretraining audio (default: the embedded corpus)")
    parser.add_argument("--tasks", default=None, help="HEAR task directory (default: the embedded tasks)")
    parser.add_argument("--storage-path", default=None, help="Ray run storage (shared storage on clusters)")
    _add_evaluation_flags(parser, d)
    parser.add_argument(
        "--rankme-early-stop",
        action="store_true",
        help="stop a trial whose RankMe at --check-fraction of its steps is not in the top --keep-fraction "
        "so far (the first --min-samples - 1 trials to get there always continue). "
        + default_grid_saving().replace("%", "%%"),
    )
    parser.add_argument(
        "--keep-fraction",
        type=float,
        default=d["early_stop_keep_fraction"],
        help="share of trials kept at the decision step, rounded up (default: %(default)s)",
    )
    parser.add_argument(
        "--check-fraction",
        type=float,
        default=d["early_stop_check_fraction"],
        help="decide at the first RankMe step at or after this share of a trial's steps (default: %(default)s)",
    )
    parser.add_argument("--min-samples", type=int, default=d["early_stop_min_samples"])
    parser.add_argument(
        "--plan",
        action="store_true",
        help="print each trial's resolved configuration and cost, and the study's total, and exit (runs nothing)",
    )
    _add_cost_flags(parser)
    return parser


def _add_cost_flags(parser: argparse.ArgumentParser) -> None:
    """The hardware --plan prices the study on (sweeps.study.cost); None: not given."""
    parser.add_argument(
        "--gpu",
        default=None,
        help=f"with --plan: the GPU, one of {', '.join(GPU_PEAK_BF16_TFLOPS)} "
        f"(its dense bf16 peak; default: {DEFAULT_GPU})",
    )
    parser.add_argument(
        "--mfu",
        type=float,
        default=None,
        help=f"with --plan: model FLOPs utilisation in (0, 1] (default: {DEFAULT_MFU})",
    )
    parser.add_argument(
        "--gpus", type=int, default=None, help=f"with --plan: GPUs the trials share (default: {DEFAULT_GPUS})"
    )


def cost_assumptions_from_args(args: argparse.Namespace) -> CostAssumptions:
    given = {"gpu": args.gpu, "mfu": args.mfu, "gpus": args.gpus}
    if not args.plan and any(value is not None for value in given.values()):
        raise ValueError("--gpu, --mfu and --gpus price a plan; add --plan (they change nothing in a run)")
    return CostAssumptions(**{name: value for name, value in given.items() if value is not None})


def study_config_from_args(args: argparse.Namespace) -> StudyConfig:
    return StudyConfig(
        grid=args.grid,
        profile=args.profile,
        study_name=args.study,
        resume=args.resume,
        tracking_uri=args.tracking_uri,
        storage_path=args.storage_path,
        corpus_dir=args.corpus,
        tasks_dir=args.tasks,
        gpus_per_trial=args.gpus_per_trial,
        cpus_per_trial=args.cpus_per_trial,
        max_concurrent=args.max_concurrent,
        address=args.address,
        n_bootstrap=args.n_bootstrap,
        probe=args.probe,
        eval_checkpoints=args.eval_checkpoints,
        quiet=args.quiet,
        rankme_early_stop=args.rankme_early_stop,
        early_stop_keep_fraction=args.keep_fraction,
        early_stop_check_fraction=args.check_fraction,
        early_stop_min_samples=args.min_samples,
    )


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.plan:  # the resolved recipe and cost of every trial (sweeps.study.plan); no Ray, no MLflow
        try:
            assumptions = cost_assumptions_from_args(args)
            print(plan_text(args.grid, args.profile, eval_checkpoints=args.eval_checkpoints, assumptions=assumptions))
        except ValueError as error:
            print(f"error: {error}", file=sys.stderr)
            return 2
        return 0
    try:
        cost_assumptions_from_args(args)  # refuses the cost flags without --plan
        outcome = run_study(study_config_from_args(args))
    except (ValueError, MissingPackagesError, OutputDirectoryError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(outcome.report_markdown)
    uri = tracking.resolve_tracking_uri(args.tracking_uri)
    # `mlflow` is installed beside this Python (the venv's bin), not necessarily on PATH.
    print("\n".join(closing_lines(outcome, tracking_uri=uri, bin_dir=Path(sys.executable).parent)))
    return 1 if outcome.trials_failed else 0


if __name__ == "__main__":
    raise SystemExit(run_cli(main, "sweeps.scaling"))
