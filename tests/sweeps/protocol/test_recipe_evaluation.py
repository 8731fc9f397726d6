"""The evaluation policy of each profile lives in its recipe (sweeps.protocol.recipe), not in the driver."""

from __future__ import annotations

import pytest

from sweeps.protocol.recipe import RECIPES, eval_seeds_for
from sweeps.study.config import StudyConfig, StudyEvaluation


@pytest.mark.parametrize(
    "profile, probe, seeds",
    [
        # linear and kNN have no random state: every seed repeats one score.
        ("cpu_default", "knn", 1), ("cpu_default", "linear", 1), ("paper", "knn", 1), ("paper", "linear", 1),
        # An MLP probe on the CPU profile: two seeds keep the study within minutes.
        ("cpu_default", "hear", 2), ("cpu_default", "quick", 2),
        ("paper", "hear", 3), ("paper", "appc", 3), ("paper", "quick", 3),
    ],
)  # fmt: skip
def test_eval_seeds_per_profile_and_probe(profile, probe, seeds):
    assert eval_seeds_for(profile, probe) == seeds
    config = StudyConfig(grid="mask_ratio", profile=profile, evaluate=StudyEvaluation(probe=probe))
    assert config.resolved_eval_seeds == seeds
    chosen = StudyConfig(grid="mask_ratio", profile=profile, evaluate=StudyEvaluation(probe=probe, seeds=5))
    assert chosen.resolved_eval_seeds == 5  # the study's own setting wins over the policy


@pytest.mark.parametrize("profile, probe, checkpoints", [("cpu_default", "knn", "all"), ("paper", "appc", "final")])
def test_default_probe_and_checkpoints_per_profile(profile, probe, checkpoints):
    assert (RECIPES[profile].probe, RECIPES[profile].eval_checkpoints) == (probe, checkpoints)
    config = StudyConfig(grid="mask_ratio", profile=profile)
    assert (config.resolved_probe, config.resolved_eval_checkpoints) == (probe, checkpoints)
