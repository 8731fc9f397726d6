"""A study's baselines: its first trial's model on its shards' normalisation, child runs apart from the
trials, paired with the trials' checkpoints; and each trial's own initialisation seed."""

from __future__ import annotations

import dataclasses
import json
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from pipeline.evaluate.baselines import CONTROL, INITIALISATION, NAIVE
from pipeline.tracking import runs as tracking
from sweeps.record.keys import STUDY_EXPERIMENT
from sweeps.record.replicates import write_q_replicates
from sweeps.record.study import read_study
from sweeps.study.baselines import BaselinesInProgress, log_study_baselines, study_baseline_setup
from sweeps.study.config import StudyConfig, StudyEvaluation
from sweeps.study.context import StudyContext
from sweeps.study.grids import expand_grids
from sweeps.study.law_analysis import study_comparisons
from sweeps.study.trainable import study_shards_dir, trial_pretrain_config, trial_seed
from tests.pipeline.rankme.test_rankme_pool import write_shards
from tests.support.hear_task_fixtures import build_tiny_language_task, build_tiny_tasks

N_MELS = 64  # the dasheng preset of mae-debug


@pytest.fixture()
def study(tmp_path, monkeypatch):
    """A study run, its tiny tasks and a shard manifest."""
    monkeypatch.setenv("AUDIOSCALE_HOME", str(tmp_path / "home"))
    tasks = build_tiny_tasks(tmp_path / "tasks", clips_per_class={"train": 6, "valid": 3, "test": 5})
    build_tiny_language_task(tasks, clips_per_class={"train": 6, "valid": 3, "test": 5})
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    parent = tracking.start_or_resume_run(tracking_uri=uri, experiment_name=STUDY_EXPERIMENT, run_name="masks")
    context = StudyContext(study_name="masks", parent_run_id=parent.run_id, tracking_uri=uri,
                           storage_path=str(tmp_path / "ray"), corpus_dir=str(tmp_path / "corpus"),
                           shards_root=str(tmp_path / "shards"), tasks_dir=str(tasks), probe="knn")  # fmt: skip
    trials = expand_grids("mask_ratio", profile="cpu_default")
    preset = trial_pretrain_config(trials[0]).describe_model().spec.frontend_preset
    shards = study_shards_dir(context.shards_root, preset, trials[0].max_hours)
    # Real rows: the baselines re-estimate running statistics on the shards' calibration crops.
    write_shards(shards, rows=12, frames=400, n_mels=N_MELS)
    manifest = json.loads((shards / "manifest.json").read_text())
    stats = {"mean": list(np.linspace(-8.0, -2.0, N_MELS)), "std": list(np.linspace(1.0, 3.0, N_MELS))}
    (shards / "manifest.json").write_text(json.dumps(manifest | stats))
    return context, trials


def test_the_baselines_use_the_first_trials_model_on_its_shards_normalisation(study):
    context, trials = study
    setup = study_baseline_setup(trials[0], context, kinds=(NAIVE, INITIALISATION, CONTROL), control_steps=25)
    assert setup.model_name == trials[0].model_name == "mae-debug" and setup.probe == "knn"
    assert setup.bin_mean[0] == -8.0 and setup.bin_std[-1] == 3.0 and len(setup.bin_mean) == N_MELS
    assert setup.control.steps == 25 and setup.tasks_dir == context.tasks_dir


def test_baselines_are_child_runs_beside_the_trials_and_pair_with_them(study):
    context, trials = study
    setup = study_baseline_setup(trials[0], context, kinds=(NAIVE, INITIALISATION, CONTROL), control_steps=25)
    said = []
    threads = torch.get_num_threads()
    # Measured in a thread of this process beside the trials, on one torch thread; the count is given back.
    measuring = BaselinesInProgress(setup, context, said.append).start()
    assert torch.get_num_threads() == 1
    records = measuring.wait()
    assert torch.get_num_threads() == threads and measuring.seconds > 0
    assert [r.name for r in records] == [NAIVE, INITIALISATION, CONTROL]
    assert any(line.startswith("baseline control: Q ") for line in said)
    # A trial child run that logged replicates: the report pairs its steps with the baselines.
    trial = tracking.start_or_resume_run(tracking_uri=context.tracking_uri, experiment_name=STUDY_EXPERIMENT,
                                         run_name="mask0.50@masks", parent_run_id=context.parent_run_id)  # fmt: skip
    write_q_replicates(trial, {0: (0.5, 0.6, 0.7), 300: (0.6, 0.7, 0.8)})
    record = read_study(context.tracking_uri, "masks", run_id=context.parent_run_id)
    assert [run["run_name"] for run in record.trial_runs] == ["mask0.50@masks"]  # baselines are not trials
    assert [b.name for b in record.baselines()] == [NAIVE, INITIALISATION, CONTROL]
    comparisons = study_comparisons(record)
    assert {name: len(r) for name, r in comparisons.baseline_replicates.items()} == dict.fromkeys(
        [NAIVE, INITIALISATION, CONTROL],
        200,  # the multilabel task's 200 resamples bound Q's
    )
    assert comparisons.replicates_of(trial.run_id) == {0: (0.5, 0.6, 0.7), 300: (0.6, 0.7, 0.8)}
    # A second study on the same tasks and probe reuses the measured values (the home's cache).
    said.clear()
    again = log_study_baselines(setup, context, said.append)
    assert any("reusing" in line for line in said) and [r.q for r in again] == [r.q for r in records]


def test_each_trial_has_its_own_initialisation_seed():
    trials = expand_grids("mask_ratio", profile="cpu_default")
    seeds = [trial_seed(t.name) for t in trials]
    assert len(set(seeds)) == len(trials) == 5
    assert seeds == [trial_seed(t.name) for t in trials]  # stable: a resumed trial starts from the same weights
    context = StudyContext(study_name="s", parent_run_id="p", tracking_uri="sqlite:///x.db", storage_path="r",
                           corpus_dir="c", shards_root="h", tasks_dir="t")  # fmt: skip
    assert [trial_pretrain_config(t, context).training.seed for t in trials] == seeds


def test_baselines_flag_per_profile_and_refusals():
    assert StudyConfig(grid="mask_ratio").resolved_baselines == (NAIVE, INITIALISATION, CONTROL)
    assert StudyConfig(grid="mask_ratio", profile="paper").resolved_baselines == (NAIVE,)
    assert StudyConfig(grid="mask_ratio", evaluate=StudyEvaluation(baselines="none")).resolved_baselines == ()
    assert StudyConfig(grid="mask_ratio", evaluate=StudyEvaluation(control_steps=50)).resolved_control_steps == 50
    assert StudyConfig(grid="mask_ratio").resolved_control_steps == 4000
    with pytest.raises(ValueError, match=r"--baselines: unknown \['random'\]; choose from naive, initialisation"):
        StudyEvaluation(baselines="naive,random")
    with pytest.raises(ValueError, match="--control-steps must be at least 1"):
        StudyEvaluation(control_steps=0)


def test_a_baseline_that_fails_beside_the_trials_raises_in_the_driver_when_waited_for(study, tmp_path):
    context, trials = study
    setup = study_baseline_setup(trials[0], context, kinds=(NAIVE,), control_steps=25)
    gone = dataclasses.replace(setup, tasks_dir=str(tmp_path / "no-tasks-here"))
    measuring = BaselinesInProgress(gone, context, lambda line: None).start()
    with pytest.raises(Exception, match="no-tasks-here"):
        measuring.wait()


def test_the_driver_starts_the_baselines_once_the_last_trial_has_started():
    from sweeps.study.beside_trials import StartOnceEveryTrialStarted

    calls = []
    starter = StartOnceEveryTrialStarted(3, lambda: calls.append("start"))
    for trial_id in ["a", "b", "a"]:  # "a" again: Tune's rerun of a trial whose process was lost
        starter.on_trial_start(0, [], SimpleNamespace(trial_id=trial_id))
    assert calls == []  # two of three trials started: the cores are still full
    starter.on_trial_start(0, [], SimpleNamespace(trial_id="c"))
    assert calls == ["start"]


def test_the_callback_that_starts_them_survives_tunes_pickling(study):
    from ray import cloudpickle

    from sweeps.study.beside_trials import StartOnceEveryTrialStarted

    context, trials = study
    setup = study_baseline_setup(trials[0], context, kinds=(NAIVE,), control_steps=25)
    starter = StartOnceEveryTrialStarted(1, BaselinesInProgress(setup, context, lambda line: None).start)
    restored = cloudpickle.loads(cloudpickle.dumps(starter))  # what Tune does with its callbacks
    restored.on_trial_start(0, [], SimpleNamespace(trial_id="a"))  # a restored copy starts nothing
    assert restored.start is None and restored.started == {"a"}
