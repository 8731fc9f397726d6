"""`python -m pipeline.evaluate --hear-module PKG.MODULE [--model-file F]`: score an outside model.

Any module implementing the HEAR API (pipeline.interop.hear_module) is scored like a study's
checkpoint (pipeline.interop.hear_module_run): R on a RankMe pool played as audio, Q on the tasks
with the given probe. Here R needs `--rankme-shards` and `--rankme-crop-frames` (else it is NaN)
and nothing goes to MLflow. To place the module on a study's Q(R) figure, measured on the pool
and probe that study used, run `python -m sweeps.external --hear-module ... --study NAME`
(sweeps.study.external_log), which calls `score_hear_module` below with the study's pool.
"""

from __future__ import annotations

import re
import warnings
from pathlib import Path

from pipeline.cli.errors import UserError
from pipeline.evaluate.config import NO_LID_HEAD, EvaluateConfig
from pipeline.evaluate.probes.scene import SceneProbe
from pipeline.evaluate.run import EvaluationResult, format_table, write_results
from pipeline.interop.hear_module import HearModule, load_hear_module
from pipeline.interop.hear_module_run import evaluate_hear_module
from pipeline.rankme.pool import RankMePool, select_pool
from pipeline.storage import paths


def output_label(config: EvaluateConfig, label: str | None = None) -> str:
    """The name results are filed under (and, in a study, the MLflow run's): the label or the module."""
    text = label or config.hear_module
    if not re.fullmatch(r"[\w.+-]{1,100}", text):
        raise UserError(f"--label {text!r}: use letters, digits and . _ + - only (it names an MLflow run)")
    return text


def pool_from_flags(config: EvaluateConfig) -> RankMePool | None:
    """The pool `--rankme-shards` / `--rankme-crop-frames` / `--rankme-n` name; None when none is given."""
    if not config.rankme_shards:
        return None
    if config.rankme_crop_frames is None:
        raise UserError("--rankme-shards with --hear-module needs --rankme-crop-frames N (the pool's crop length)")
    return select_pool(config.rankme_shards, crop_frames=config.rankme_crop_frames, n=config.rankme_n)


def score_hear_module(
    config: EvaluateConfig,
    probe_training: SceneProbe,
    pool: RankMePool | None,
) -> tuple[EvaluationResult, HearModule, Path]:
    """Load the module named by the config and score it on `pool` and the tasks; returns the tasks folder too."""
    if config.lid_head != NO_LID_HEAD:
        raise UserError("--lid-head needs frame embeddings; a HEAR module is scored on scene embeddings only")
    hear = load_hear_module(config.hear_module, config.model_file)
    if pool is None:
        warnings.warn("no RankMe pool (--rankme-shards, or a study's): R is recorded as NaN", stacklevel=2)
    tasks_dir = Path(config.tasks_dir) if config.tasks_dir else paths.default_tasks_dir()
    task_names = config.task_names
    result = evaluate_hear_module(
        hear, tasks_dir=str(tasks_dir), task_names=task_names, pool=pool, task_rankme_n=config.task_rankme_n,
        seeds=config.seeds, probe_training=probe_training, progress=lambda line: print(line, flush=True),
    )  # fmt: skip
    return result, hear, tasks_dir


def print_results(result: EvaluationResult, output: Path) -> None:
    json_path, csv_path = write_results(result, output)
    print(format_table(result))
    print(f"results: {json_path} and {csv_path}")


def run_hear_module(config: EvaluateConfig, probe_training: SceneProbe) -> int:
    """The --hear-module branch of `python -m pipeline.evaluate` (see the module doc)."""
    label = output_label(config)
    result, _, _ = score_hear_module(config, probe_training, pool_from_flags(config))
    print_results(result, Path(config.output) if config.output else paths.audioscale_home() / "external" / label)
    return 0
