"""Named grids: the paper's settings, CPU defaults that build, Cartesian products, stable names."""

from __future__ import annotations

import numpy as np
import pytest

from models import build_model, count_parameters, list_models
from sweeps.study.grids import expand_grids, parse_grid_names


def test_paper_mask_ratio_grid_is_030_to_095_in_005_steps():
    ratios = [t.mask_ratio for t in expand_grids("mask_ratio", profile="paper")]
    np.testing.assert_allclose(ratios, np.arange(0.30, 0.951, 0.05))
    assert len(ratios) == 14


def test_paper_size_grid_is_the_study_table_and_registered():
    trials = expand_grids("size", profile="paper")
    assert len(trials) == 16
    assert {t.model_name for t in trials} <= set(list_models())
    assert "mae-en1536-24" in {t.model_name for t in trials} and "mae-en256-1" in {t.model_name for t in trials}


def test_cpu_size_grid_builds_five_increasing_debug_sizes():
    trials = expand_grids("size", profile="cpu_default")
    counts = [count_parameters(build_model(t.model_name, **t.model_overrides)) for t in trials]
    assert len(counts) >= 5
    assert all(a < b for a, b in zip(counts, counts[1:]))
    assert counts[-1] / counts[0] > 10  # a decade of N at least, for Q(N)


def test_cpu_arch_grid_builds_every_architecture():
    trials = expand_grids("arch", profile="cpu_default")
    assert {t.arch for t in trials} == {
        "mae",
        "audiomae++",
        "axlstm",
        "crossmae",
        "ssast",
        "hubert",
        "wav2vec2",
        "wav2vec2-conformer",
    }
    counts = {t.name: count_parameters(build_model(t.model_name, **t.model_overrides)) for t in trials}
    by_name = {t.name: t for t in trials}
    assert by_name["crossmae"].model_overrides["decoder"] == "cross"
    for family in ("mae", "hubert", "wav2vec2"):  # Table V's "large" column is the wider debug model
        assert counts[f"{family}-wide"] > 1.5 * counts[family]


def test_paper_arch_grid_names_registered_models_and_table_iv_settings():
    from models.registry import list_models

    trials = expand_grids("arch", profile="paper")
    assert {t.model_name for t in trials} <= set(list_models())
    assert len([t for t in trials if t.arch == "ssast"]) == 7  # Table IV's seven SSAST settings


@pytest.mark.parametrize("profile", ["paper", "cpu_default"])
def test_data_volume_hours_are_log_spaced_and_ascending(profile):
    hours = np.array([t.max_hours for t in expand_grids("data_volume", profile=profile)])
    ratios = hours[1:] / hours[:-1]
    # rtol 1%: the paper profile's hours are rounded to 3 significant figures
    assert len(hours) >= 5 and np.allclose(ratios, ratios[0], rtol=0.01) and ratios[0] > 1


def test_size_by_data_volume_is_the_cartesian_product_with_stable_names():
    trials = expand_grids("size,data_volume")
    assert len(trials) == 5 * 5
    assert [t.name for t in trials] == [t.name for t in expand_grids(["size", "data_volume"])]
    assert len({t.name for t in trials}) == 25
    first = trials[0]
    assert first.name == "w16d1_h0.1875" and first.coordinates == {"size": "w16d1", "data_volume": 0.1875}
    assert first.model_overrides["encoder_dim"] == 16 and first.max_hours == 0.1875


def test_size_by_compute_varies_steps_per_size():
    trials = expand_grids("size,compute")
    assert {t.train_steps for t in trials} == {25, 50, 100, 200}
    assert len(trials) == 20


def test_conflicting_or_unknown_grids_are_rejected():
    with pytest.raises(ValueError, match="both choose the model"):
        parse_grid_names("size,arch")
    with pytest.raises(ValueError, match="unknown grid 'depth'"):
        parse_grid_names("depth")
    with pytest.raises(ValueError, match="unknown profile"):
        expand_grids("size", profile="laptop")


def test_the_teacher_objective_trains_the_study_mae_in_every_mae_grid():
    for grid, profile in [("mask_ratio", "cpu_default"), ("size", "cpu_default"), ("size", "paper"),
                          ("compute", "paper"), ("data_volume", "cpu_default")]:  # fmt: skip
        plain = expand_grids(grid, profile=profile)
        teacher = expand_grids(grid, profile=profile, objective="teacher")
        assert [t.model_name for t in teacher] == [f"t-{t.model_name}" for t in plain]
        assert [t.model_overrides for t in teacher] == [t.model_overrides for t in plain]
        for trial in teacher[:2]:  # every name is registered and builds with the trial's overrides
            assert build_model(trial.model_name, **trial.model_overrides, mask_ratio=trial.mask_ratio or 0.75)
    with pytest.raises(ValueError, match="--objective teacher trains the study MAE; trial hubert is hubert-debug"):
        expand_grids("arch", profile="cpu_default", objective="teacher")
    with pytest.raises(ValueError, match="choose one of mae, teacher"):
        expand_grids("mask_ratio", objective="byol")


def test_the_plan_and_the_cli_take_the_objective():
    from sweeps.scaling import parse_study_args
    from sweeps.study.plan import plan_text

    config, _ = parse_study_args(["--grid", "mask_ratio", "--objective", "teacher"])
    assert config.objective == "teacher"
    text = plan_text("size", "paper", objective="teacher")
    assert "t-mae-en768-12" in text and "mae-en768-12" in text
    plain_flops = plan_text("size", "paper")
    assert text != plain_flops  # the teacher's forward pass adds FLOPs
