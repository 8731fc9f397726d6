"""The study driver: Ray Tune fans out one trial per grid point; MLflow records the study.

One study = one parent MLflow run (experiment `audioscale-studies`, named after the study); one
trial = one child run named `<trial>@<study>` (sweeps.record.keys.child_run_name). MLflow is the ledger of what is done: a resumed
study skips trials whose child run is marked ok, and re-running a trial reuses its child run
(found by name), so no child run is ever duplicated. A trial that raises is marked failed in its
child run; Tune carries on with the rest and the laws are fitted on what finished.
With `rankme_early_stop`, a `RankMeEarlyStopScheduler` stops trials whose RankMe is low at their
check step; the driver then marks their child runs "stopped_early" (done: no Q, not re-run).

The trial runner is a "module:function" path taking (TrialSpec, StudyContext, child run) and
returning a TrialRecord (sweeps.record.trial); Ray workers import it by name. The real one is sweeps.study.trainable's
pretrain-then-evaluate; the driver first builds the shard sets its trials need.
"""

from __future__ import annotations

import dataclasses
import importlib
import uuid
from dataclasses import dataclass, field
from typing import Any

import pandas as pd
import ray
from ray import tune

from pipeline.session.ray_session import connect_ray
from pipeline.storage import paths
from pipeline.tracking import runs as tracking
from pipeline.tracking.lifecycle import killed_on_interrupt
from sweeps.record import keys
from sweeps.record.keys import STUDY_EXPERIMENT, child_run_name
from sweeps.record.study import StudySettings, read_study, read_study_settings
from sweeps.record.trial import TrialRecord, mark_trial_failed, mark_trial_stopped_early
from sweeps.report.comparisons import Comparisons
from sweeps.report.study_fits import StudyFits
from sweeps.study.baselines import BaselinesInProgress, study_baseline_setup
from sweeps.study.beside_trials import StartOnceEveryTrialStarted
from sweeps.study.config import REAL_TRIAL_RUNNER, StudyConfig
from sweeps.study.context import StudyContext
from sweeps.study.early_stop import EarlyStopSummary, RankMeEarlyStopScheduler, summarize_study_table
from sweeps.study.fits_beside import LawsFittedAhead, fit_laws_while_baselines_finish
from sweeps.study.grids import TrialSpec, expand_grids
from sweeps.study.inputs import prepare_study_inputs
from sweeps.study.law_analysis import log_study_analysis, study_comparisons
from sweeps.study.phase_times import PhaseClock
from sweeps.study.preflight import check_study_inputs
from sweeps.study.progress import StudyProgress, progress_writer

__all__ = ["REAL_TRIAL_RUNNER", "StudyConfig", "StudyOutcome", "run_study", "study_trainable"]


@dataclass(frozen=True, kw_only=True)
class StudyOutcome:
    study_name: str
    parent_run_id: str
    tracking_uri: str  # absolute: where the study's runs are
    trials_run: list[str]
    trials_skipped: list[str]  # finished in an earlier attempt
    trials_failed: list[str]
    table: pd.DataFrame
    fits: StudyFits
    report_markdown: str
    early_stop: EarlyStopSummary | None = None  # when the scheduler ran, or earlier attempts stopped trials
    comparisons: Comparisons = field(default_factory=Comparisons)  # the baselines and replicates the summary pairs
    phase_seconds: dict[str, float] = field(default_factory=dict)  # sweeps.study.phase_times
    phase_beside: dict[str, str] = field(default_factory=dict)  # a phase run beside another -> that phase


def _load_runner(path: str):
    module_name, _, function_name = path.partition(":")
    return getattr(importlib.import_module(module_name), function_name)


# Tune runs a trial again when its process died with its node (a cluster losing a worker node, a
# preempted spot instance): the rerun takes over the trial's child run and its pretraining resumes
# from the last checkpoint in --storage-path. Tune cannot tell that from a trial that raised, so a
# rerun of a trial this driver run already saw fail stops at once (`_refuse_a_rerun_of_a_failure`).
NODE_LOSS_RETRIES = 2


class TrialFailedEarlier(RuntimeError):
    """Tune's rerun of a trial that raised in this run of the driver: not run twice."""


def _error_in_this_attempt(context: StudyContext, trial_name: str) -> str | None:
    """The error the trial recorded in this run of the driver, if it raised in it."""
    run_id = tracking.find_run_id(
        context.tracking_uri, STUDY_EXPERIMENT, child_run_name(context.study_name, trial_name)
    )
    if run_id is None:
        return None
    tags = tracking.attach_run(context.tracking_uri, run_id).tags()
    if tags.get(keys.STATUS_TAG) == keys.STATUS_FAILED and tags.get(keys.FAILED_IN_ATTEMPT_TAG) == context.attempt_id:
        return tags.get(keys.ERROR_TAG, "failed")
    return None


def _refuse_a_rerun_of_a_failure(context: StudyContext, trial_name: str) -> None:
    error = _error_in_this_attempt(context, trial_name)
    if error is not None:
        raise TrialFailedEarlier(error)


def study_trainable(config: dict[str, Any]) -> None:
    """One Tune trial: run the trial into its child run, then report Q to Tune."""
    spec = TrialSpec(**config["trial"])
    context = StudyContext(**config["context"])
    _refuse_a_rerun_of_a_failure(context, spec.name)
    child = tracking.start_or_resume_run(
        tracking_uri=context.tracking_uri,
        experiment_name=STUDY_EXPERIMENT,
        run_name=child_run_name(context.study_name, spec.name),
        parent_run_id=context.parent_run_id,
    )
    try:
        result: TrialRecord = _load_runner(config["runner"])(spec, context, child)
        # The first trial to report its RankMe pool records it on the study run (sweeps.record.rankme_pool).
        result.write(child, study_run=tracking.attach_run(context.tracking_uri, context.parent_run_id))
        child.finish()
    except Exception as error:
        mark_trial_failed(child, f"{type(error).__name__}: {error}", attempt_id=context.attempt_id)
        raise
    tune.report({keys.Q_METRIC: result.q, keys.RANKME_METRIC: result.rankme})


def run_study(config: StudyConfig) -> StudyOutcome:
    """Run (or resume) a study over `config.grid`, then fit and log its laws."""
    # The tracking URI is resolved once, here ($MLFLOW_TRACKING_URI or the embedded store, made
    # absolute): the checks, the study run, every trial and the closing lines read this one value.
    config = dataclasses.replace(config, tracking_uri=tracking.resolve_tracking_uri(config.tracking_uri))
    clock = PhaseClock()
    clock.begin("start-up")
    trials = expand_grids(
        config.grid, profile=config.profile, objective=config.objective, train_seeds=config.train_seeds
    )
    task_set = check_study_inputs(config)  # before the study run is opened: a bad input leaves nothing RUNNING
    parent, context = _open_study(config, n_trials=len(trials))
    parent.set_tags({keys.TASK_SET_TAG: task_set.describe()})
    # MLflow is the ledger: a resumed study skips what an earlier attempt finished (read before the
    # trials run; the closing read below sees what they wrote).
    ledger = read_study(context.tracking_uri, context.study_name, run_id=parent.run_id)
    finished = ledger.finished_trials()
    remaining = [t for t in trials if t.name not in finished]
    say = progress_writer(quiet=config.quiet)
    say(
        f"{context.study_name}: {len(trials)} trials ({len(remaining)} to run); {context.probe} probe, "
        f"{context.eval_checkpoints} checkpoints evaluated per trial; tasks: {task_set.describe()}; "
        f"MLflow: {context.tracking_uri}"
    )
    with killed_on_interrupt(parent):  # Ctrl-C / SIGTERM: the study run is KILLED, not left RUNNING
        failed, ahead = _run_trials(config, remaining, context, say, clock) if remaining else ([], None)
    clock.begin("fits" if ahead is None else "report")
    study = read_study(context.tracking_uri, context.study_name, run_id=parent.run_id)  # read once for the analysis
    table = study.trial_table
    if ahead is not None and not table.equals(ahead.table):  # cannot happen unless a trial run changed meanwhile
        ahead = None
    early_stop = _summarize_early_stop(config, parent, table, trials)
    if ahead is None:
        say(f"fitting the laws on {len(table)} trial(s) ({config.n_bootstrap} bootstrap resamples each)")
    comparisons = study_comparisons(study)
    fits, markdown = log_study_analysis(
        study, table, n_bootstrap=config.n_bootstrap, comparisons=comparisons, fits=ahead.fits if ahead else None,
        keep_fraction=config.early_stop_keep_fraction, check_fraction=config.early_stop_check_fraction,
        extra_sections=[early_stop.markdown()] if early_stop else (),
    )  # fmt: skip
    parent.finish()
    clock.end()
    return StudyOutcome(
        study_name=context.study_name,
        parent_run_id=parent.run_id,
        tracking_uri=context.tracking_uri,
        trials_run=[t.name for t in remaining],
        trials_skipped=sorted(finished & {t.name for t in trials}),
        trials_failed=failed,
        table=table,
        fits=fits,
        report_markdown=markdown,
        early_stop=early_stop,
        comparisons=comparisons,
        phase_seconds=clock.seconds,
        phase_beside=clock.beside,
    )


def _open_study(config: StudyConfig, *, n_trials: int) -> tuple[tracking.TrackedRun, StudyContext]:
    """Start (or, with resume, reopen) the study's parent run; the context its trials share."""
    study_name = config.resolved_study_name
    uri = config.tracking_uri  # resolved by run_study
    existing = tracking.find_run_id(uri, STUDY_EXPERIMENT, study_name)
    # A study left RUNNING by a process that is gone (killed) is taken over (with a note), as with --resume.
    running_in = tracking.live_owner(uri, existing) if existing is not None else None
    if running_in is not None:  # before "pass --resume": resuming a study that runs now is refused too
        raise ValueError(
            f"study {study_name!r} is running now in process {running_in}; wait for it to end or stop it "
            "(then --resume continues it), or pass --study NEW_NAME to start another"
        )
    left_by = tracking.stale_owner(uri, existing) if existing is not None and not config.resume else None
    if existing is not None and not config.resume and left_by is None:
        raise ValueError(
            f"study {study_name!r} already exists in {uri}; pass --resume to continue it "
            "or --study NEW_NAME to start another"
        )
    earlier_probe = read_study_settings(uri, existing, study_name).probe if existing is not None else ""
    if earlier_probe not in ("", config.resolved_probe):  # Q compares only within one probe
        raise ValueError(
            f"study {study_name!r} scores its trials with the {earlier_probe} probe; resume it with --probe {earlier_probe}"
        )
    parent = tracking.start_or_resume_run(
        tracking_uri=uri,
        experiment_name=STUDY_EXPERIMENT,
        run_name=study_name,
        tags={keys.GRID_TAG: config.grid, keys.PROFILE_TAG: config.profile},
    )
    # The probe is part of the study, recorded on its run: Q compares only within one probe.
    settings = StudySettings(
        name=study_name, grid=config.grid, profile=config.profile, probe=config.resolved_probe,
        train_seeds=config.train_seeds,
    )  # fmt: skip
    parent.log_params(settings.params(n_trials=n_trials))
    context = StudyContext(
        study_name=study_name,
        parent_run_id=parent.run_id,
        attempt_id=uuid.uuid4().hex[:12],
        tracking_uri=uri,
        storage_path=str(config.storage_path or paths.default_ray_storage_dir()),
        corpus_dir=str(config.corpus_dir or paths.default_corpus_dir()),
        shards_root=str(config.shards_root or paths.default_shards_dir()),
        tasks_dir=str(config.tasks_dir or paths.default_tasks_dir()),
        gpus_per_trial=config.gpus_per_trial,
        rankme_early_stop=config.rankme_early_stop,
        # The probe, its seeds and the checkpoints scored: the config's, else the profile recipe's policy.
        probe=config.resolved_probe,
        profile=config.profile,  # the training recipe (sweeps.protocol.recipe)
        eval_seeds=config.resolved_eval_seeds,
        global_batch_size=config.pretrain.global_batch_size,
        eval_checkpoints=config.resolved_eval_checkpoints,
    )
    return parent, context


def _run_trials(
    config: StudyConfig, trials: list[TrialSpec], context: StudyContext, say, clock: PhaseClock
) -> tuple[list[str], LawsFittedAhead | None]:
    """Build the inputs the trials need, run them on Ray Tune; return the names of those that failed,
    and the laws when they were fitted while the baselines ended."""
    scheduler = (
        RankMeEarlyStopScheduler(
            keep_fraction=config.early_stop_keep_fraction,
            check_fraction=config.early_stop_check_fraction,
            min_samples=config.early_stop_min_samples,
        )
        if config.rankme_early_stop
        else None
    )
    started_ray = connect_ray(config.address)
    cluster_cpus = ray.cluster_resources().get("CPU", 2)
    max_concurrent = _trials_at_once(config, context, cluster_cpus)
    # Evaluation comes after pretraining, so a trial's whole share of the cores is free for it.
    context = dataclasses.replace(context, cores_per_trial=max(1, min(4, int(cluster_cpus // max_concurrent))))
    baselines: BaselinesInProgress | None = None
    ahead = None
    try:
        if config.prepare_shards:
            clock.begin("defaults")
            prepare_study_inputs(config, trials, context, say)
            if config.resolved_baselines:  # on the shards' normalisation: after they exist
                setup = study_baseline_setup(trials[0], context, kinds=config.resolved_baselines,
                                             control_steps=config.resolved_control_steps)  # fmt: skip
                baselines = BaselinesInProgress(setup, context, say)
        clock.begin("trials")
        say(f"running {len(trials)} trial(s), up to {max_concurrent} at a time on {cluster_cpus:g} CPUs")
        raised = lambda name: _error_in_this_attempt(context, name) is not None  # noqa: E731
        callbacks = [] if config.quiet else [StudyProgress(len(trials), max_concurrent=max_concurrent, raised=raised)]
        if baselines is not None:
            say("the baselines are measured beside the last trials, on one core of this process")
            callbacks.append(StartOnceEveryTrialStarted(len(trials), baselines.start))
        failed = _fan_out(
            trials, context, config, max_concurrent=max_concurrent, scheduler=scheduler, callbacks=callbacks
        )
        if scheduler is not None:
            _record_stopped_trials(scheduler, trials, context)
        if baselines is not None:  # the closing lines compare the trials with them
            ahead = fit_laws_while_baselines_finish(baselines, context, n_bootstrap=config.n_bootstrap, say=say)
            baselines.wait()
            clock.record_beside("baselines", baselines.seconds, beside="trials")
            if ahead is not None:
                clock.record_beside("fits", ahead.seconds, beside="baselines")
    finally:
        if started_ray:
            ray.shutdown()
    return failed, ahead


def _trials_at_once(config: StudyConfig, context: StudyContext, cluster_cpus: float) -> int:
    """--max-concurrent, else one trial per core (one thread each): sooner than two-thread trials in turn,
    as fast as one more than the cores and lighter on memory (docs/performance.md)."""
    if config.max_concurrent is not None:
        return config.max_concurrent
    return max(1, int(cluster_cpus // (config.cpus_per_trial + context.cpus_per_worker)))


def _summarize_early_stop(
    config: StudyConfig, parent: tracking.TrackedRun, table: pd.DataFrame, trials: list[TrialSpec]
) -> EarlyStopSummary | None:
    """What RankMe early stopping saved, when it ran now or stopped trials in an earlier attempt."""
    stopped_before = table.get(keys.STATUS_COLUMN, pd.Series(dtype=object)).eq(keys.STATUS_STOPPED_EARLY).any()
    if table.empty or not (config.rankme_early_stop or stopped_before):
        return None
    early_stop = summarize_study_table(
        table,
        {t.name: t.train_steps for t in trials},
        keep_fraction=config.early_stop_keep_fraction,
        check_fraction=config.early_stop_check_fraction,
    )
    parent.log_metrics(
        {"early_stop.steps_saved_fraction": early_stop.steps_saved_fraction,
         "early_stop.best_changed": float(early_stop.best_changed)}, step=0,
    )  # fmt: skip
    return early_stop


def _fan_out(
    trials: list[TrialSpec],
    context: StudyContext,
    config: StudyConfig,
    *,
    max_concurrent: int,
    scheduler: RankMeEarlyStopScheduler | None,
    callbacks: list,
) -> list[str]:
    """Run the trials on Tune; return the names of those that failed."""
    tuner = tune.Tuner(
        tune.with_resources(study_trainable, {"cpu": config.cpus_per_trial, "gpu": config.gpus_per_trial}),
        param_space={
            "trial": tune.grid_search([dataclasses.asdict(t) for t in trials]),
            "context": dataclasses.asdict(context),
            "runner": config.runner,
        },
        tune_config=tune.TuneConfig(
            max_concurrent_trials=max_concurrent,
            scheduler=scheduler,
            # A stopped trial's actor must die: it owns the trial's Train run, which dies with it.
            reuse_actors=False,
            trial_name_creator=lambda trial: trial.config["trial"]["name"],
            trial_dirname_creator=lambda trial: trial.config["trial"]["name"],
        ),
        run_config=tune.RunConfig(
            name=context.study_name,
            storage_path=context.storage_path,
            failure_config=tune.FailureConfig(max_failures=NODE_LOSS_RETRIES),
            verbose=0,  # Tune's own tables: replaced by the progress lines
            callbacks=callbacks,
        ),
    )
    results = tuner.fit()
    return sorted(result.config["trial"]["name"] for result in results if result.error is not None)


def _record_stopped_trials(scheduler: RankMeEarlyStopScheduler, trials: list[TrialSpec], context: StudyContext) -> None:
    """Mark the child runs of trials the scheduler stopped; one that finished first stays ok."""
    specs = {t.name: t for t in trials}
    for name, check in scheduler.stopped_trials().items():
        run_name = child_run_name(context.study_name, name)
        # The scheduler stopped this trial: its run is ours to close, though the Ray worker process
        # that owned it may live on (Ray keeps idle workers), so it is attached, not claimed.
        run_id = tracking.find_run_id(context.tracking_uri, STUDY_EXPERIMENT, run_name)
        run = tracking.attach_run(context.tracking_uri, run_id) if run_id else tracking.start_or_resume_run(
            tracking_uri=context.tracking_uri, experiment_name=STUDY_EXPERIMENT, run_name=run_name,
            parent_run_id=context.parent_run_id,
        )  # fmt: skip
        if tracking.read_run(run.tracking_uri, run.run_id)["tags"].get(keys.STATUS_TAG) == keys.STATUS_OK:
            run.finish()  # the stop arrived after the trial had logged its result
            continue
        spec = specs[name]
        identity = {keys.TRIAL_PARAM: name, keys.MODEL_NAME_PARAM: spec.model_name, keys.ARCH_PARAM: spec.arch,
                    keys.CONFIGURATION_PARAM: name}  # fmt: skip
        if spec.mask_ratio is not None:
            identity[keys.MASK_RATIO_PARAM] = spec.mask_ratio
        mark_trial_stopped_early(
            run,
            identity=identity,
            stopped_at_step=check.check_step,
            rankme_by_step=scheduler.rankme_histories[name],
        )
