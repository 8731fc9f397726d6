"""`python -m pipeline.evaluate --hear-module PKG.MODULE [--model-file F] [--study NAME]`: an outside model.

Any module implementing the HEAR API (pipeline.evaluate.hear_module) is scored like a study's
checkpoint (pipeline.evaluate.hear_module_run): R on the study's RankMe pool played as audio, Q on
the tasks with the given probe. With `--study`, the pool is the one the study's trials measured on
and the result becomes an external point of the study (sweeps.study.external_log): a child run of
its study run, drawn on its Q(R) figure at the next refit and never fitted. Without `--study`, R
needs `--rankme-shards` and `--rankme-crop-frames` (else it is NaN) and nothing goes to MLflow.
"""

from __future__ import annotations

import argparse
import re
import warnings
from pathlib import Path

from pipeline import paths
from pipeline.cli_errors import UserError
from pipeline.evaluate.hear_module import load_hear_module
from pipeline.evaluate.hear_module_run import evaluate_hear_module
from pipeline.evaluate.probes.scene import SceneProbe
from pipeline.evaluate.run import format_table, write_results
from pipeline.shards.rankme_pool import RankMePool, select_pool
from pipeline.tracking import resolve_tracking_uri


def add_hear_module_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model-file", default="", help="--hear-module only: the path given to its load_model (weights file or folder)")
    parser.add_argument("--study", default=None, help="--hear-module only: log the result as an external point of this study (its RankMe pool; not fitted)")
    parser.add_argument("--label", default=None, help="--hear-module only: the point's name on the study figure; None: the module name")
    parser.add_argument(
        "--rankme-crop-frames", type=int, default=None,
        help="--hear-module only: RankMe pool crop length in the shards' mel frames (10 ms); None: the study's",
    )  # fmt: skip


def _label(args: argparse.Namespace) -> str:
    text = args.label or args.hear_module
    if not re.fullmatch(r"[\w.+-]{1,100}", text):
        raise UserError(f"--label {text!r}: use letters, digits and . _ + - only (it names an MLflow run)")
    return text


def _pool(args: argparse.Namespace, tracking_uri: str, study_run: str | None) -> RankMePool | None:
    if args.rankme_shards:
        if args.rankme_crop_frames is None:
            raise UserError("--rankme-shards with --hear-module needs --rankme-crop-frames N (the pool's crop length)")
        return select_pool(args.rankme_shards, crop_frames=args.rankme_crop_frames, n=args.rankme_n)
    if study_run is not None and args.rankme_n is not None:
        raise UserError("--rankme-n with --study: the study's pool sets N; add --rankme-shards (and "
                        "--rankme-crop-frames) to measure on another pool, whose R does not compare with the trials'")
    if study_run is None:
        warnings.warn("no --study and no --rankme-shards: R has no pool to be measured on (recorded as NaN)", stacklevel=2)
        return None
    from sweeps.study.external_log import study_rankme_pool

    return study_rankme_pool(tracking_uri, study_run, args.study)


def run_hear_module(args: argparse.Namespace, probe_training: SceneProbe) -> int:
    """The --hear-module branch of `python -m pipeline.evaluate` (see the module doc)."""
    if args.lid_head != "none":
        raise UserError("--lid-head needs frame embeddings; a HEAR module is scored on scene embeddings only")
    label = _label(args)
    uri = resolve_tracking_uri(args.tracking_uri)
    study_run = None
    if args.study:
        from sweeps.study.external_log import study_probe, study_run_id

        study_run = study_run_id(uri, args.study)
        probe = study_probe(uri, study_run)
        if probe and probe != args.probe:
            raise UserError(f"--study {args.study} scored Q with the {probe} probe; pass --probe {probe} "
                            f"(not {args.probe}): Q compares only within one probe")
    hear = load_hear_module(args.hear_module, args.model_file)
    pool = _pool(args, uri, study_run)
    tasks_dir = Path(args.tasks_dir) if args.tasks_dir else paths.default_tasks_dir()
    task_names = None if args.tasks == "all" else [name.strip() for name in args.tasks.split(",") if name.strip()]
    if task_names == []:
        raise UserError(f"--tasks {args.tasks!r} names no task; give 'all' or comma-separated task names")
    result = evaluate_hear_module(
        hear, tasks_dir=str(tasks_dir), task_names=task_names, pool=pool, task_rankme_n=args.task_rankme_n,
        seeds=args.seeds, probe_training=probe_training, progress=lambda line: print(line, flush=True),
    )  # fmt: skip
    if study_run is not None and not args.no_mlflow:
        from sweeps.study.external_log import log_external_point

        result.run_id = log_external_point(result, hear, tracking_uri=uri, parent_run_id=study_run,
                                           study_name=args.study, label=label, tasks_dir=str(tasks_dir))
    json_path, csv_path = write_results(result, args.output or paths.audioscale_home() / "external" / label)
    print(format_table(result))
    print(f"results: {json_path} and {csv_path}")
    if result.run_id:
        print(f"MLflow run: {result.run_id} (external point of study {args.study}; "
              f"`python -m sweeps.laws --study {args.study}` redraws its figures with it, outside the fits)")
    return 0
