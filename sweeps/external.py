"""`python -m sweeps.external --hear-module PKG.MODULE [--model-file F] --study NAME [--label L]`.

Scores any HEAR-API module (pipeline.interop.hear_module_cli) on the RankMe pool and with the
probe a study's trials used, and logs it as an external point of that study
(sweeps.study.external_log): a child run of the study run, drawn on its Q(R) figure at the next
refit (`python -m sweeps.laws --study NAME`) and never fitted. Every other flag is
`python -m pipeline.evaluate`'s; `--rankme-shards DIR --rankme-crop-frames N` measure R on another
pool instead, whose R does not compare with the trials'. The tasks must be those the study's Q is
the mean of (sweeps.study.external_task_set): another set is refused before the module is scored,
unless `--accept-task-set` is given, and then recorded on the point's run.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

from pipeline.cli.command import Command
from pipeline.cli.errors import UserError
from pipeline.cli.flags import add_flags, check_required, config_from_flags, flag
from pipeline.evaluate.__main__ import check_device, parse_config, probe_training_from
from pipeline.evaluate.config import EvaluateConfig
from pipeline.evaluate.run import write_results
from pipeline.interop.hear_module_cli import output_label, pool_from_flags, print_results, score_hear_module
from pipeline.storage import paths
from pipeline.tracking.runs import checked_store
from sweeps.record.study import read_study
from sweeps.study.external_log import log_external_point, study_probe, study_rankme_pool, study_run_id
from sweeps.study.external_task_set import (
    ACCEPT_FLAG,
    ExternalTaskSet,
    check_external_task_set,
    study_task_names,
    task_names_in,
)

COMMAND = Command(
    "sweeps.external",
    "An outside (HEAR-API) model scored on a study's RankMe pool and probe, logged as its external point.",
)


@dataclasses.dataclass(frozen=True, kw_only=True)
class ExternalPointConfig:
    """The flags an external point adds to `python -m pipeline.evaluate`'s."""

    study: str = flag(
        "--study", None, "the study whose pool and probe to use; the point becomes its child run", required=True
    )
    label: str | None = flag("--label", None, "the point's name on the study figure; None: the module name")
    accept_task_set: bool = flag(
        ACCEPT_FLAG, False, "score on a task folder whose tasks differ from those the study's Q is the mean of; "
        "without it the point is refused before scoring. The difference is recorded on the point's run "
        "(audioscale.task_set)",
    )  # fmt: skip


def build_parser() -> argparse.ArgumentParser:
    parser = COMMAND.parser(EvaluateConfig, config_file_tables="[evaluate]")
    add_flags(parser, ExternalPointConfig)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    config, namespace = parse_config(argv, parser)
    check_required(parser, ExternalPointConfig, namespace, file_holds_it=False)
    args = config_from_flags(ExternalPointConfig, namespace)
    if not config.hear_module:
        raise UserError(
            "python -m sweeps.external scores a --hear-module PKG.MODULE; to evaluate a checkpoint "
            "use python -m pipeline.evaluate"
        )
    check_device(config.device)
    config.check_counts()
    probe_training = probe_training_from(config)
    label = output_label(config, args.label)
    uri = checked_store(config.tracking_uri)  # a server that is not there: one line, before the module is scored
    study_run = study_run_id(uri, args.study)
    probe = study_probe(uri, study_run)
    if probe and probe != config.probe:
        raise UserError(
            f"--study {args.study} scored Q with the {probe} probe; pass --probe {probe} "
            f"(not {config.probe}): Q compares only within one probe"
        )
    if config.rankme_n is not None and not config.rankme_shards:
        raise UserError(
            "--rankme-n with --study: the study's pool sets N; add --rankme-shards (and "
            "--rankme-crop-frames) to measure on another pool, whose R does not compare with the trials'"
        )
    tasks_dir = Path(config.tasks_dir) if config.tasks_dir else paths.default_tasks_dir()
    task_set = _checked_task_set(config, args, uri, study_run, tasks_dir)  # before the module is scored
    pool = pool_from_flags(config) or study_rankme_pool(uri, study_run, args.study)
    result, hear, tasks_dir = score_hear_module(config, probe_training, pool)
    output = Path(config.output) if config.output else paths.audioscale_home() / "external" / label
    write_results(result, output)  # on disk before MLflow: a store that stops answering loses nothing
    if not config.no_mlflow:
        result.run_id = log_external_point(
            result,
            hear,
            tracking_uri=uri,
            parent_run_id=study_run,
            study_name=args.study,
            label=label,
            tasks_dir=str(tasks_dir),
            task_set=task_set.describe(),
        )
    print_results(result, output)
    if result.run_id:
        print(
            f"MLflow run: {result.run_id} (external point of study {args.study}; "
            f"`python -m sweeps.laws --study {args.study}` redraws its figures with it, outside the fits)"
        )
    return 0


def _checked_task_set(
    config: EvaluateConfig, args: ExternalPointConfig, uri: str, study_run: str, tasks_dir: Path
) -> ExternalTaskSet:
    """The point's tasks against the study's: refused when they differ (unless accepted), said when accepted."""
    where = f"--tasks-dir {tasks_dir}" + ("" if config.tasks_dir else " (the default)")
    if config.task_names is not None:
        where += f" with --tasks {config.tasks}"
    check = check_external_task_set(
        args.study, study_task_names(read_study(uri, args.study, run_id=study_run)),
        task_names_in(tasks_dir, config.task_names), accept_difference=args.accept_task_set, where=where,
    )  # fmt: skip
    if not check.matches:
        print(f"external: note: {where}: {check.difference()} (accepted; recorded on the point's run)", file=sys.stderr)
    elif not check.known:
        print(f"external: note: task set {check.describe()}", file=sys.stderr)
    return check


def cli() -> int:
    """`python -m` and the console script: user errors one line, exit code 2 (pipeline.cli.command)."""
    return COMMAND.run(main)


if __name__ == "__main__":
    raise SystemExit(cli())
