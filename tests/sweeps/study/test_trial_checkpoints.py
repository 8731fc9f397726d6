"""A real study trial on the CPU defaults, shortened: Ray Train pretraining of mae-debug on tiny
prep shards, then R and Q at each of its checkpoints (initialisation, Table III's steps, the last).

Fails if pretraining leaves the pooled representation where it started, or if the checkpoints do
not give distinct (R, Q) points: the two things the default study's Q(R) needs.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from pipeline.checkpoint import load_model_from_checkpoint
from pipeline.rankme.model_rankme import RANKME_DECIMALS
from pipeline.tracking import runs as tracking
from sweeps.protocol.recipe import evaluation_steps_for
from sweeps.record.keys import STUDY_EXPERIMENT
from sweeps.study.context import StudyContext
from sweeps.study.grids import TrialSpec
from sweeps.study.trainable import run_pretrain_and_evaluate
from tests.support.hear_task_fixtures import build_tiny_tasks
from tests.support.pretrain_testdata import make_tiny_shards

pytestmark = pytest.mark.ray
STEPS = 28  # Table III's fractions of 28: 2, 4, 8, 12


@pytest.fixture(scope="module")
def trial_outcome(ray_local, tmp_path_factory):
    root = tmp_path_factory.mktemp("trial")
    shards_root = root / "shards"
    shards_root.mkdir()
    (shards_root / "dasheng").symlink_to(make_tiny_shards(root, preset_name="dasheng"))
    uri = f"sqlite:///{root / 'mlflow.db'}"
    parent = tracking.start_or_resume_run(tracking_uri=uri, experiment_name=STUDY_EXPERIMENT, run_name="study")
    context = StudyContext(
        study_name="study", parent_run_id=parent.run_id, tracking_uri=uri, storage_path=str(root / "ray"),
        corpus_dir=str(root / "unused"), shards_root=str(shards_root), tasks_dir=str(build_tiny_tasks(root / "tasks", label_noise=0.25)),
        probe="knn", eval_seeds=1, eval_checkpoints="all", global_batch_size=8,
    )  # fmt: skip
    spec = TrialSpec(
        name="mask0.75",
        model_name="mae-debug",
        arch="mae",
        model_overrides={},
        mask_ratio=0.75,
        max_hours=None,
        train_steps=STEPS,
        coordinates={"mask_ratio": 0.75},
        configuration="mask0.75",  # as --train-seeds names a replicate's grid point
    )
    child = tracking.start_or_resume_run(
        tracking_uri=uri, experiment_name=STUDY_EXPERIMENT, run_name="study/mask0.75", parent_run_id=parent.run_id
    )
    result = run_pretrain_and_evaluate(spec, context, child)
    return result, root


def test_every_wanted_checkpoint_is_evaluated_on_the_pool(trial_outcome):
    result, _ = trial_outcome
    assert evaluation_steps_for(STEPS, "all") == (0, 2, 4, 8, 12, STEPS)  # the initialisation, Table III's steps
    assert sorted(result.checkpoint_points) == [0, 2, 4, 8, 12, STEPS]
    assert result.configuration == "mask0.75"  # the bootstrap unit the replicates share
    last = result.checkpoint_points[STEPS]
    assert (last.rankme, last.q) == (result.rankme, result.q)  # the last checkpoint is the trial's result
    # Q on the paired test-clip resamples at every evaluated step (the multilabel task's 200 bound them).
    assert sorted(result.q_replicates) == sorted(result.checkpoint_points)
    assert {len(r) for r in result.q_replicates.values()} == {200}
    # Training measured R on the same pool at the same steps (evaluation takes its value): the same
    # numbers, logged to RANKME_DECIMALS.
    for step, value in result.rankme_by_step.items():
        assert round(result.checkpoint_points[step].rankme, RANKME_DECIMALS) == value


def test_every_checkpoint_has_a_test_clip_interval_of_q(trial_outcome):
    result, _ = trial_outcome
    # The kNN probe's seeds repeat one score; the bootstrap over test clips gives each point its interval.
    assert result.q_interval_over == "test clips" and result.q_ci_low <= result.q <= result.q_ci_high
    for step, point in result.checkpoint_points.items():
        low, high = point.q_ci
        # A quarter of the labels are wrong, so no checkpoint scores 1.0 and every interval has width.
        assert 0.0 < point.q < 1.0, (step, point)
        assert low <= point.q <= high and 0.0 < high - low < 0.6, (step, point)
    # (The tiny tasks score 1.0 here; widths on imperfect scores: tests/pipeline/evaluate/test_probe_test_bootstrap.py.)


def test_checkpoints_give_distinct_points(trial_outcome):
    result, _ = trial_outcome
    points = {(round(p.rankme, 4), round(p.q, 4)) for p in result.checkpoint_points.values()}
    assert len(points) >= 4, points
    rankmes = [p.rankme for p in result.checkpoint_points.values()]
    assert max(rankmes) / min(rankmes) > 1.02, rankmes


def test_pretraining_changes_the_pooled_representation(trial_outcome):
    _, root = trial_outcome
    checkpoints = sorted((root / "ray").rglob("checkpoint_step_*"))
    first, last = checkpoints[0], checkpoints[-1]
    assert first.name == "checkpoint_step_00000000"
    crops = torch.from_numpy(np.random.default_rng(0).standard_normal((16, 200, 64)).astype(np.float32))
    pooled = []
    for checkpoint in (first, last):
        model, _ = load_model_from_checkpoint(checkpoint, device="cpu")
        with torch.no_grad():
            pooled.append(model.eval().embed(crops).mean(dim=1))
    # Cosine similarity between a crop's scene embedding before and after pretraining.
    similarity = torch.nn.functional.cosine_similarity(pooled[0], pooled[1], dim=1)
    assert similarity.mean() < 0.95, similarity
