"""The paper profile's resolved trial configurations against the RankMe study's own numbers."""

from __future__ import annotations

import pytest

from sweeps.protocol.recipe import (
    RECIPES,
    rankme_steps_for,
    steps_per_epoch,
    warmup_steps_for,
)
from sweeps.study.grids import PAPER_HOURS, PAPER_STEPS, expand_grids
from sweeps.study.plan import plan_text, plan_trial

# The paper's numbers, typed in from the text (Deng et al.): value, where it says so.
PAPER = {
    "global_batch_size": 256,  # Sec. III-B, App. B
    "peak_lr": 3e-4,  # App. B "initial learning rate is 0.0003"
    "weight_decay": 0.01,  # App. B
    "warmup_epochs": 3,  # App. B
    "min_lr_ratio": 0.1,  # App. B "decayed to 10% of its maximum value"
    "steps": 746_000,  # Sec. III-B, App. B
    "optimizer": "adamw8bit",  # App. B "8-bit AdamW"
    "mask_ratio": 0.75,  # Sec. III-B, App. B
    "mask_grid": [round(0.30 + 0.05 * i, 2) for i in range(14)],  # Sec. III-B "0.3 to 0.95 in 0.05 increments"
    "mask_grid_hours": 5333,  # Sec. IV-B
    "size_compute_hours": 10_666,  # Sec. IV-D, IV-E
    "hours_range": (55, 277_000),  # Sec. III-A
    "steps_range": (2_000, 746_000),  # Sec. III-B, App. B
    "rankme_steps": (50_000, 100_000, 200_000, 300_000),  # Table III
    "rankme_pool_n": 30_000,  # Sec. III-C, App. A
}
TABLE_I_M = {"mae-en1536-24": 707.01, "mae-en768-12": 111.32, "mae-en256-1": 26.53}  # Table I


@pytest.mark.parametrize("grid", ["size", "mask_ratio", "compute", "data_volume"])
def test_paper_trials_resolve_to_the_study_recipe(grid):
    for spec in expand_grids(grid, profile="paper")[:3]:
        config = plan_trial(spec, "paper").config
        assert config.training.global_batch_size == PAPER["global_batch_size"]
        assert config.optim.peak_lr == PAPER["peak_lr"]  # used as given, not rescaled by batch / 256
        assert config.optim.weight_decay == PAPER["weight_decay"]
        assert config.schedule.min_lr_ratio == PAPER["min_lr_ratio"]
        assert config.optim.optimizer == PAPER["optimizer"]
        assert config.validation.validation_stop and config.validation.validation_every_steps == steps_per_epoch(
            spec.max_hours, 256
        )
        if grid != "mask_ratio":
            assert config.model.mask_ratio == PAPER["mask_ratio"]


def test_paper_size_trials_train_746k_steps_at_10666_h_with_3_epoch_warmup():
    trials = [plan_trial(spec, "paper") for spec in expand_grids("size", profile="paper")]
    assert len(trials) == 16
    for trial in trials:
        config = trial.config
        assert config.training.steps == PAPER["steps"] and trial.spec.max_hours == PAPER["size_compute_hours"]
        # 10,666 h of 10 s clips = 3,839,760 clips = 15,000 steps of 256: Dasheng's epoch, by coincidence.
        assert steps_per_epoch(10_666, 256) == 15_000
        assert config.schedule.warmup_steps == PAPER["warmup_epochs"] * 15_000
        assert config.rankme.rankme_steps == PAPER["rankme_steps"] + (PAPER["steps"],)
    params = {t.spec.model_name: t.total_parameters / 1e6 for t in trials}
    for name, total_m in TABLE_I_M.items():
        assert params[name] == pytest.approx(total_m, rel=1e-3)


def test_paper_grids_cover_the_papers_ranges():
    masks = [t.mask_ratio for t in expand_grids("mask_ratio", profile="paper")]
    assert masks == PAPER["mask_grid"]
    assert {t.max_hours for t in expand_grids("mask_ratio", profile="paper")} == {PAPER["mask_grid_hours"]}
    assert (PAPER_HOURS[0], PAPER_HOURS[-1]) == PAPER["hours_range"]
    assert (PAPER_STEPS[0], PAPER_STEPS[-1]) == PAPER["steps_range"]
    assert {t.max_hours for t in expand_grids("compute", profile="paper")} == {PAPER["size_compute_hours"]}
    # data volume sets the hours even when combined with size (whose own hours are 10,666)
    combined = expand_grids("size,data_volume", profile="paper")
    assert {t.max_hours for t in combined} == set(PAPER_HOURS)


def test_rankme_steps_are_table_iii_or_its_fractions():
    assert rankme_steps_for(746_000) == (50_000, 100_000, 200_000, 300_000, 746_000)
    assert rankme_steps_for(700_000) == (50_000, 100_000, 200_000, 300_000, 700_000)
    assert rankme_steps_for(100) == (7, 14, 29, 43, 100)  # 50/700, 100/700, 200/700, 300/700 of 100
    assert rankme_steps_for(2_000) == (143, 286, 571, 857, 2_000)


def test_warmup_is_capped_where_three_epochs_exceed_the_run():
    paper = RECIPES["paper"]
    # 277,000 h: one epoch is 389,532 steps, so 3 epochs would outlast 746,000 steps.
    assert warmup_steps_for(paper, hours=277_000, train_steps=746_000, global_batch_size=256) == 74_600
    assert warmup_steps_for(paper, hours=55, train_steps=746_000, global_batch_size=256) == 3 * 78
    assert warmup_steps_for(RECIPES["cpu_default"], hours=3.0, train_steps=100, global_batch_size=32) is None


def test_cpu_default_uses_its_measured_lr_the_papers_decay_and_table_iii_fractions():
    config = plan_trial(expand_grids("mask_ratio", profile="cpu_default")[0], "cpu_default").config
    assert (
        config.training.global_batch_size,
        config.optim.peak_lr,
        config.optim.weight_decay,
        config.schedule.warmup_steps,
    ) == (
        32,
        3e-4,
        0.01,
        None,
    )
    assert (config.optim.optimizer, config.schedule.min_lr_ratio, config.validation.validation_stop) == (
        "adamw",
        0.1,
        False,
    )
    assert config.training.steps == 300
    assert config.data.shuffle_buffer_crops == 4096  # a whole epoch of the default corpus (3,054 rows)
    assert config.rankme.rankme_steps == (21, 43, 86, 129, 300) and config.rankme.rankme_every_steps == 0


def test_plan_text_names_every_value():
    text = plan_text("compute", "paper")
    assert text.count("\n- s") == 10 and "RankMe pool N: 30,000" in text and "adamw8bit" in text


def test_paper_plan_shows_app_c_probe_and_the_task_set():
    text = plan_text("size", "paper")
    assert (
        "Q: probe appc (paper App. C): MLP with 1 or 2 hidden layer(s), 16 of 16 grid settings, <= 500 epochs, " in text
    )
    assert "stops after 20 checks (every 1 epoch(s)) without a better validation loss" in text
    assert "Q's tasks: the paper's 16 HEAR scene tasks (Sec. III-D): SPC-5, SPC-F, VL," in text
    cpu = plan_text("mask_ratio", "cpu_default")
    assert "Q: probe knn: deterministic" in cpu and "the embedded default tasks unless --tasks" in cpu
