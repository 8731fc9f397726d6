"""`--train-seeds K`: every configuration trained K times, resampled together, its seed spread reported."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from sweeps.report.markdown import study_markdown
from sweeps.report.seed_spread import seed_spread_table
from sweeps.report.study_fits import fit_study_laws
from sweeps.scaling import parse_study_args
from sweeps.study.grids import expand_grids
from sweeps.study.plan import plan_text
from sweeps.study.trainable import trial_seed


def test_each_grid_point_becomes_k_trials_of_one_configuration_with_their_own_seeds():
    single = expand_grids("mask_ratio")
    tripled = expand_grids("mask_ratio", train_seeds=3)
    assert len(tripled) == 3 * len(single) == 15
    first = [trial for trial in tripled if trial.configuration == "mask0.80"]
    # The first replicate keeps the point's name: a one-seed study gains seeds on --resume.
    assert [trial.name for trial in first] == ["mask0.80", "mask0.80-seed1", "mask0.80-seed2"]
    assert len({trial_seed(trial.name) for trial in first}) == 3
    assert {trial.mask_ratio for trial in first} == {0.8}
    assert all(trial.configuration is None for trial in single)
    with pytest.raises(ValueError, match="--train-seeds must be at least 1"):
        expand_grids("mask_ratio", train_seeds=0)


def test_the_flag_reaches_the_plan():
    config, _ = parse_study_args(["--grid", "mask_ratio", "--train-seeds", "2"])
    assert config.train_seeds == 2
    text = plan_text("mask_ratio", "cpu_default", train_seeds=2)
    assert text.startswith("Plan: grid mask_ratio, profile cpu_default: 10 trial(s)") and "- mask0.50-seed1" in text


def _replicated_table() -> pd.DataFrame:
    rng = np.random.default_rng(2)
    rows = []
    for rankme, q in ((20.0, 0.50), (40.0, 0.58), (80.0, 0.63), (160.0, 0.66), (320.0, 0.675)):
        for seed in range(3):
            noisy = q + rng.normal(0.0, 0.01)
            rows.append({"trial": f"r{rankme:g}" + (f"-seed{seed}" if seed else ""), "configuration": f"r{rankme:g}",
                         "rankme": rankme * np.exp(rng.normal(0.0, 0.05)), "q": noisy, "q_ci_low": noisy - 0.004,
                         "q_ci_high": noisy + 0.004, "status": "ok", "mask_ratio": 0.8})  # fmt: skip
    return pd.DataFrame(rows)


def test_the_report_shows_the_seed_spread_beside_one_trials_interval():
    table = _replicated_table()
    spread = seed_spread_table(table)
    assert len(spread) == 5 and set(spread["seeds"]) == {3}
    first = table[table["configuration"] == "r20"]
    row = spread.iloc[0]
    assert row["q_sd"] == pytest.approx(first["q"].std(ddof=1))
    assert row["q_interval_half_width"] == pytest.approx(0.004)
    markdown = study_markdown("seeded", table, fit_study_laws(table, n_bootstrap=20, grid="mask_ratio"), [])
    assert "## Training seeds" in markdown and "| r20 | 3 |" in markdown
    assert "training seeds move Q more than the evaluation's own noise" in markdown  # SD ~0.01 vs 0.004


def test_two_seeds_show_a_range_not_a_standard_deviation():
    table = _replicated_table()
    two = table[~table["trial"].str.endswith("-seed2")]
    spread = seed_spread_table(two)
    assert spread["q_sd"].isna().all() and (spread["q_max"] >= spread["q_min"]).all()
    assert "n/a" in study_markdown("two", two, fit_study_laws(two, n_bootstrap=0, grid="mask_ratio"), [])
