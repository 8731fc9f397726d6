"""One real trial: pretrain (Ray Train, from inside the Tune trial) then evaluate (RankMe, probes).

Shards: each front-end preset, and each nested hour subset of the data_volume grid, gets its own
shard directory `<study shards>/<preset>[-h<hours>]`, built from the corpus by prep before the
trials start (`prepare_study_shards`, on the driver: concurrent trials must not race to build it).

A trial describes its model once (a weightless build, `PretrainConfig.describe_model`): the front
end that picks its shards, the parameter count, the FLOPs and the mask ratio it records all come
from that one description, which pretraining reuses instead of building its own.
"""

from __future__ import annotations

import math
import os
import zlib
from pathlib import Path

import torch
from ray.tune.integration.ray_train import TuneReportCallback

from pipeline.defaults import ensure_shards
from pipeline.evaluate.input_cache import shared_cache_dir
from pipeline.evaluate.probes.scene import scene_probe
from pipeline.evaluate.run import evaluate_checkpoint
from pipeline.evaluate.scores import quality_q_interval, quality_q_test_interval
from pipeline.pretrain.driver import PretrainConfig, PretrainResult, run_pretraining
from pipeline.shards.format import read_manifest
from pipeline.storage.checkpoint_copy import local_checkpoint
from pipeline.storage.paths import shards_dir_for
from pipeline.task_format.reader import read_checked_tasks
from pipeline.tracking.keys import READOUT_AND_INPUT_KEYS
from pipeline.tracking.runs import TrackedRun
from sweeps.protocol.early_stop_rule import checkpoint_every_steps_for
from sweeps.protocol.recipe import evaluation_steps_for, trial_overrides
from sweeps.record.checkpoint_point import CheckpointPoint
from sweeps.record.keys import Q_INTERVAL_OVER_SEEDS, Q_INTERVAL_OVER_TEST_CLIPS, STUDY_EXPERIMENT, child_run_name
from sweeps.record.rankme_pool import RankMePoolRecord
from sweeps.record.trial import TrialRecord
from sweeps.study.context import StudyContext
from sweeps.study.grids import TrialSpec


def study_shards_dir(shards_root: str | Path, preset: str, max_hours: float | None) -> Path | str:
    """`<root>/<preset>[-h<hours>]`: a folder, or a URI under a bucket root."""
    return shards_dir_for(preset_name=preset, max_hours=max_hours, root=shards_root)


def trial_pretrain_config(spec: TrialSpec, context: StudyContext | None = None) -> PretrainConfig:
    """The trial's pretraining run; without a context, only the model part (enough to describe it)."""
    model = {"model_name": spec.model_name, "model_overrides": spec.model_overrides, "mask_ratio": spec.mask_ratio}
    if context is None:
        return PretrainConfig.from_flat(**model)
    # The profile's recipe: batch, lr schedule, optimizer, Table III's RankMe steps, validation.
    recipe = trial_overrides(
        context.profile, train_steps=spec.train_steps, hours=spec.max_hours, context_batch=context.global_batch_size,
        model_name=spec.model_name,
    )  # fmt: skip
    return PretrainConfig.from_flat(
        **model,
        **recipe,
        seed=trial_seed(spec.name),
        steps=spec.train_steps,
        use_gpu=context.gpus_per_trial > 0,
        cpus_per_worker=context.cpus_per_worker,
        run_name=child_run_name(context.study_name, spec.name),
        storage_path=context.storage_path,
        tracking_uri=context.tracking_uri,
        experiment_name=STUDY_EXPERIMENT,
        parent_run_id=context.parent_run_id,
        checkpoint_every_steps=checkpoint_every_steps_for(spec.train_steps),
        # The checkpoints the trial evaluates besides the last (the paper's points are checkpoints).
        checkpoint_steps=evaluation_steps_for(spec.train_steps, context.eval_checkpoints),
    )


def trial_seed(trial_name: str) -> int:
    """The trial's own initialisation (and masking and crop-order) seed, stable across resumes: trials
    sharing one initialisation would make every trial's step-0 point the same draw, so a study's
    initialisation points would measure one random network, not the spread over them."""
    return zlib.crc32(trial_name.encode()) % 2**31


def needed_shard_sets(trials: list[TrialSpec]) -> list[tuple[str, float | None]]:
    """(front-end preset, hour budget) of every shard set the trials read, each once."""
    return sorted(
        {(trial_pretrain_config(t).describe_model().spec.frontend_preset, t.max_hours) for t in trials}, key=str
    )


def existing_shard_sets(trials: list[TrialSpec], shards_root: str) -> list[Path | str] | None:
    """The trials' shard sets when every one is already finished under `shards_root` (a manifest
    there), else None: a study given --shards alone uses them as they are."""
    found = []
    for preset, max_hours in needed_shard_sets(trials):
        directory = study_shards_dir(shards_root, preset, max_hours)
        try:
            read_manifest(directory)
        except FileNotFoundError:
            return None
        found.append(directory)
    return found


def prepare_study_shards(trials: list[TrialSpec], *, corpus_dir: str, shards_root: str) -> list[Path | str]:
    """Build (or reuse: prep skips a finished identical output) every shard set the trials need."""
    if not Path(corpus_dir).exists():
        raise ValueError(
            f"no pretraining corpus at {corpus_dir}; build it with "
            f"`python -m pipeline.corpus pretrain --output {corpus_dir}` or pass --corpus"
        )
    return [
        ensure_shards(
            corpus_dir=corpus_dir, preset_name=preset, max_hours=max_hours, root=shards_root, show_progress=False
        )
        for preset, max_hours in needed_shard_sets(trials)
    ]


def run_pretrain_and_evaluate(spec: TrialSpec, context: StudyContext, run: TrackedRun) -> TrialRecord:
    """Pretrain into the trial's child run (same name: pretraining resumes it), then evaluate."""
    config = trial_pretrain_config(spec, context)
    model = config.describe_model()  # the trial's one build
    shards_dir = study_shards_dir(context.shards_root, model.spec.frontend_preset, spec.max_hours)
    pretrained = run_pretraining(
        config.replace(shards_dir=str(shards_dir)),
        model=model,
        # The early-stop scheduler sees RankMe as training reports it, through the trial's Tune session.
        run_callbacks=[TuneReportCallback()] if context.rankme_early_stop else (),
    )
    evaluations = evaluate_trial_checkpoints(pretrained, context, wanted=config.checkpoint.checkpoint_steps)
    evaluation = evaluations[-1]  # the last checkpoint: the trial's Q and R
    samples_seen = config.training.global_batch_size * pretrained.steps
    (q_ci_low, q_ci_high), q_interval_over = q_interval(evaluation.task_scores)
    return TrialRecord(
        trial=spec.name,
        model_name=spec.model_name,
        arch=spec.arch,
        scale=spec.scale,
        n_params=model.total_parameters,
        hours=float(read_manifest(shards_dir)["total_hours"]),
        flops=model.training_flops_per_sample * samples_seen,
        mask_ratio=float(model.spec.mask_ratio),
        rankme=evaluation.rankme,
        rankme_n=evaluation.rankme_n,
        rankme_pool=evaluation.rankme_pool,
        rankme_capped=evaluation.rankme_capped,
        rankme_by_step=dict(pretrained.rankme_history),
        q=evaluation.q,
        task_scores=_means(evaluation.task_scores),
        q_ci_low=q_ci_low,
        q_ci_high=q_ci_high,
        q_interval_over=q_interval_over,
        rankme_history_logged=True,
        task_rankme=evaluation.task_rankme,
        probe_seeds=context.eval_seeds,
        coordinates=spec.coordinates,
        configuration=spec.configuration,
        checkpoint_points={
            point.step: CheckpointPoint(
                rankme=point.rankme,
                q=point.q,
                task_scores=_means(point.task_scores),
                q_ci=q_interval(point.task_scores)[0],
            )
            for point in evaluations
        },
        pool=_measured_pool(config, shards_dir, model.spec.crop_frames, evaluation),
        q_replicates={point.step: point.q_replicates for point in evaluations},
        reading={key: getattr(evaluation, key) for key in READOUT_AND_INPUT_KEYS},
    )


def _measured_pool(
    config: PretrainConfig, shards_dir: Path, model_crop_frames: int, evaluation
) -> RankMePoolRecord | None:
    """The pool pretraining selected (the training shards unless --rankme-shards; the model's crop
    length) with the N the evaluation measured: what an external point must be measured on to compare."""
    if not evaluation.rankme_pool:
        return None  # no pool, no R
    shards = config.data.rankme_shards_dir or str(shards_dir)
    crop_frames = config.model.crop_frames or model_crop_frames
    return RankMePoolRecord(
        shards_dir=shards, crop_frames=crop_frames, n=evaluation.rankme_n, fingerprint=evaluation.rankme_pool
    )


def _means(task_scores: dict[str, dict]) -> dict[str, float]:
    return {task: score["mean"] for task, score in task_scores.items()}


def evaluate_trial_checkpoints(pretrained: PretrainResult, context: StudyContext, *, wanted: tuple[int, ...]):
    """R and Q of each wanted checkpoint and of the last, in step order. One process evaluates
    them all, so each task clip is decoded and turned into log-mel once (pipeline.evaluate.input_cache)."""
    on_gpu = context.gpus_per_trial > 0
    # Every trial of the study reads the same task clips: their model inputs are kept on this node's disk.
    os.environ.setdefault("AUDIOSCALE_INPUT_CACHE_DIR", str(shared_cache_dir(context.tasks_dir)))
    if not on_gpu:  # the trial's share of the cores, in this one process (Ray gives it one thread)
        torch.set_num_threads(max(1, context.cores_per_trial))
    paths = [path for step, path in pretrained.checkpoints if step in wanted and path != pretrained.checkpoint_dir]
    tasks = read_checked_tasks(context.tasks_dir)  # once for all the trial's checkpoints
    evaluations = []
    for path in [*paths, pretrained.checkpoint_dir]:
        # A checkpoint in a bucket (--storage-path s3://...) is read from a temporary local copy.
        with local_checkpoint(path, what="the trial's checkpoint") as local:
            evaluations.append(
                evaluate_checkpoint(
                    local,
                    tasks_dir=context.tasks_dir,
                    checked_tasks=tasks,
                    seeds=context.eval_seeds,
                    probe_training=scene_probe(context.probe),
                    device="cuda" if on_gpu else "cpu",
                    # Several checkpoints: one process keeps the cache; one checkpoint: the trial's cores.
                    workers=1 if on_gpu or len(paths) > 0 else context.cores_per_trial,
                )
            )
    return evaluations


def q_interval(task_scores: dict[str, dict]) -> tuple[tuple[float, float], str]:
    """Q's 95% interval and what it resamples: over probe seeds (the MLP), else over test clips (the
    linear and kNN probes, whose seeds repeat one score), else NaN and ""."""
    over_seeds = quality_q_interval(task_scores)
    if all(map(math.isfinite, over_seeds)):
        return over_seeds, Q_INTERVAL_OVER_SEEDS
    over_clips = quality_q_test_interval(task_scores)
    if all(map(math.isfinite, over_clips)):
        return over_clips, Q_INTERVAL_OVER_TEST_CLIPS
    return (math.nan, math.nan), ""
