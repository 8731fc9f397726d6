"""What every trial of a study shares (its MLflow child run's name: sweeps.record.keys.child_run_name)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, kw_only=True)
class StudyContext:
    """What every trial of a study shares (plain values: it travels to Ray workers)."""

    study_name: str
    parent_run_id: str
    tracking_uri: str
    storage_path: str
    corpus_dir: str
    shards_root: str
    tasks_dir: str
    gpus_per_trial: float = 0.0
    # The Train worker's logical CPUs (it trains on one torch thread). With the trial function's share
    # (--cpus-per-trial, 0.5), one trial holds 1 CPU of Ray's: the default concurrency, one trial per CPU.
    cpus_per_worker: float = 0.5
    global_batch_size: int = 32  # the study's --batch-size (sweeps.study.config.StudyPretraining)
    eval_seeds: int = 3
    # The scene probe that scores each trial (pipeline.evaluate.probes.scene.scene_probe): the study's
    # --probe, else its profile recipe's (sweeps.protocol.recipe: "appc" for paper, "knn" for cpu_default).
    probe: str = "hear"
    # The trial's share of the cluster's cores once its pretraining has ended (cores / concurrent trials,
    # at most 4): the threads or processes that score its checkpoints (pipeline.evaluate.task_jobs).
    cores_per_trial: int = 1
    # The grid profile, whose training recipe (sweeps.protocol.recipe) every trial's pretraining uses.
    profile: str = "cpu_default"
    # Checkpoints each trial evaluates besides the last (sweeps.protocol.recipe.evaluation_steps_for).
    eval_checkpoints: str = "final"
    # Forward every training report (step, loss, rankme) to Tune, for the RankMe early-stop scheduler.
    rankme_early_stop: bool = False
    # This run of the study driver (a resume is another): a trial that failed in it is not retried in it.
    attempt_id: str = ""
