"""`python -m pipeline.evaluate`: score one checkpoint (RankMe + HEAR probes) and log it to MLflow."""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

import safetensors
import torch

from pipeline.checkpoint import WEIGHTS_FILE, read_checkpoint_meta
from pipeline.cli.command import Command
from pipeline.cli.errors import UserError
from pipeline.evaluate.config import NO_LID_HEAD, EvaluateConfig, probe_training_from
from pipeline.evaluate.probes.lid import LidProbeConfig
from pipeline.evaluate.run import evaluate_checkpoint, format_table, write_results
from pipeline.evaluate.tracking import (
    checkpoint_dir_of_run,
    log_evaluation,
    pretraining_run_id,
)
from pipeline.interop.hear_module_cli import run_hear_module
from pipeline.storage import paths
from pipeline.storage.bucket_check import check_bucket, without_query
from pipeline.storage.checkpoint_copy import copy_up, local_checkpoint
from pipeline.storage.uri import child_uri, is_uri
from pipeline.tracking.runs import checked_store, resolve_tracking_uri

__all__ = ["EvaluateConfig", "build_parser", "check_device", "main", "parse_config", "probe_training_from"]


COMMAND = Command(
    "pipeline.evaluate",
    "RankMe and HEAR-style probe scores (mean, 95% CI, Q) of a pretrained checkpoint, logged to MLflow.",
)


def build_parser() -> argparse.ArgumentParser:
    """One option per EvaluateConfig field (pipeline.cli.flags), and --config for a recipe of them."""
    return COMMAND.parser(EvaluateConfig, config_file_tables="[evaluate]")


def parse_config(
    argv: list[str] | None, parser: argparse.ArgumentParser | None = None
) -> tuple[EvaluateConfig, argparse.Namespace]:
    """The config from argv (over a --config file); the namespace too, for flags a caller added."""
    return COMMAND.parse(EvaluateConfig, argv, parser=parser or build_parser(), table="evaluate")


def default_workers(device: str) -> int:
    """One process per CPU core (at most 4: each holds the model and a task's embeddings); one on a GPU."""
    # The cores this process may run on (a container's share), not the host's count.
    return 1 if device != "cpu" else max(1, min(4, len(os.sched_getaffinity(0))))


def check_device(device: str) -> None:
    """Refuse a device this machine does not have before any embedding is computed."""
    try:
        kind = torch.device(device).type
    except RuntimeError as error:
        raise UserError(f"--device {device!r} is not a torch device ({error}); use cpu or cuda") from None
    if kind == "cuda" and not torch.cuda.is_available():
        raise UserError(f"--device {device}: no CUDA GPU is visible on this machine; use --device cpu")


def main(argv: list[str] | None = None) -> int:
    config, _ = parse_config(argv)
    check_device(config.device)
    config.check_counts()
    probe_training = probe_training_from(config)
    workers = config.workers if config.workers is not None else default_workers(config.device)
    if config.hear_module:
        return run_hear_module(config, probe_training)
    if config.model_file or config.rankme_crop_frames is not None:
        raise UserError("--model-file and --rankme-crop-frames go with --hear-module")
    if config.output and is_uri(config.output):
        check_bucket(config.output, what="--output", write=True)  # before any embedding is computed
    if config.run_id or not config.no_mlflow:
        checked_store(config.tracking_uri)  # a tracking server that is not there: one line, before any work
    source = config.checkpoint or checkpoint_dir_of_run(config.tracking_uri, config.run_id)
    if is_uri(source):
        with local_checkpoint(source) as local:
            return _evaluate(config, local, probe_training, workers, shown_as=str(source))
    return _evaluate(config, Path(source), probe_training, workers)


def _evaluate(config: EvaluateConfig, checkpoint_dir: Path, probe_training, workers: int, shown_as: str = "") -> int:
    """Score the local checkpoint folder `checkpoint_dir`; `shown_as`: the bucket URI it was copied
    from, which the results name and beside which `evaluation/` is written back."""
    meta = read_checkpoint_meta(checkpoint_dir)
    tasks_dir = Path(config.tasks_dir) if config.tasks_dir else paths.default_tasks_dir()
    try:
        result = evaluate_checkpoint(
            checkpoint_dir,
            tasks_dir=tasks_dir,
            task_names=config.task_names,
            rankme_shards=config.rankme_shards,
            rankme_n=config.rankme_n,
            task_rankme_n=config.task_rankme_n,
            seeds=config.seeds,
            probe_training=probe_training,
            lid_probe=None if config.lid_head == NO_LID_HEAD else LidProbeConfig(attention=config.lid_head),
            device=config.device,
            progress=lambda line: print(line, flush=True),
            workers=workers,
        )
    except safetensors.SafetensorError as error:
        raise UserError(
            f"{shown_as or checkpoint_dir / WEIGHTS_FILE} cannot be read ({error}): it is damaged or truncated; "
            "evaluate another checkpoint"
        ) from error
    if shown_as:
        result.checkpoint_dir = without_query(shown_as)
    # The scores reach the disk before MLflow: a store that stops answering (or a Ctrl-C while
    # MLflow retries it) must not lose the evaluation. With a run, they are written again with its id.
    written = _write_results_beside(result, config.output, checkpoint_dir, shown_as)
    if not config.no_mlflow:
        try:
            result.run_id = log_evaluation(
                result,
                tracking_uri=config.tracking_uri,
                parent_run_id=config.run_id or pretraining_run_id(meta),
                tasks_dir=str(tasks_dir),
            )
        except KeyboardInterrupt:
            print(f"evaluate: interrupted while logging to MLflow; the scores are kept in {written}", file=sys.stderr)
            raise
        except Exception as error:  # noqa: BLE001 - whatever MLflow raises, the scores are safe: say where
            raise UserError(
                f"--tracking-uri {resolve_tracking_uri(config.tracking_uri)}: logging the evaluation failed "
                f"({type(error).__name__}: {' '.join(str(error).split())[:200]}); the scores are kept in {written}"
            ) from error
        written = _write_results_beside(result, config.output, checkpoint_dir, shown_as)
    print(format_table(result))
    print(f"results: {written}")
    if result.run_id:
        print(f"MLflow run: {result.run_id}")
    return 0


def _write_results_beside(result, output: str | None, checkpoint_dir: Path, shown_as: str) -> str:
    """evaluation.json and .csv in --output (a folder or a bucket URI), else in the checkpoint's
    `evaluation/` (in its bucket when it came from one); returns where, for the closing line."""
    destination = output or (child_uri(shown_as, "evaluation") if shown_as else str(checkpoint_dir / "evaluation"))
    if not is_uri(destination):
        json_path, csv_path = write_results(result, destination)
        return f"{json_path} and {csv_path}"
    with tempfile.TemporaryDirectory(prefix="audioscale-evaluation-") as directory:
        write_results(result, Path(directory))
        uploaded = copy_up(Path(directory), destination, what="--output" if output else "--checkpoint")
    return f"{uploaded}/evaluation.json and {uploaded}/evaluation.csv"


def cli() -> int:
    """`python -m` and the console script: user errors one line, exit code 2 (pipeline.cli.command)."""
    return COMMAND.run(main)


if __name__ == "__main__":
    raise SystemExit(cli())
