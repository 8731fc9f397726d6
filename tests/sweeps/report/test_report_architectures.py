"""An architecture study's report: one Q(R) per architecture beside the overall one (Sec. IV-G, Fig. 7)
and Table V's analogue, on a synthetic table whose architectures follow different laws."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest

from sweeps.report.architectures import PAPER_TABLE_V, architecture_scale_table
from sweeps.report.figures import study_figures
from sweeps.report.markdown import study_markdown
from sweeps.report.study_fits import fit_study_laws
from sweeps.study.grids import expand_grids

# Each architecture's own law Q = q_inf - (x_c / R)^alpha, on its own range of R ("its own scaling trend").
LAWS = {"hubert": (0.70, 20.0, 0.8), "mae": (0.85, 30.0, 0.6), "wav2vec2": (0.60, 12.0, 1.0)}
RANGES = {"hubert": (40, 300), "mae": (60, 600), "wav2vec2": (25, 250)}


def _table() -> pd.DataFrame:
    rng = np.random.default_rng(3)
    rows = []
    for arch, (q_inf, x_c, alpha) in LAWS.items():
        for index, scale in enumerate(["base", "large", None]):
            steps = np.geomspace(*RANGES[arch], 12)[index * 4 : index * 4 + 4]
            points = {}
            for step, rankme in enumerate(steps, start=1):
                q = q_inf - (x_c / rankme) ** alpha + rng.normal(0.0, 0.002)
                points[step * 100] = {"rankme": float(rankme), "q": float(q)}
            last = points[max(points)]
            rows.append(
                {
                    "trial": f"{arch}-{index}",
                    "model_name": f"{arch}-m{index}",
                    "arch": arch,
                    "scale": scale,
                    "rankme": last["rankme"],
                    "q": last["q"],
                    "status": "ok",
                    "checkpoint_points": points,
                    "configuration": f"{arch}-{index}",
                }
            )
    return pd.DataFrame(rows)


@pytest.fixture(scope="module")
def study():
    table = _table()
    return table, fit_study_laws(table, n_bootstrap=20, grid="arch")


def test_each_architecture_gets_its_own_law_and_the_overall_one_is_fitted(study):
    _, fits = study
    assert set(fits.architecture_fits) == set(LAWS) and not fits.architecture_skipped
    for arch, (q_inf, _x_c, _alpha) in LAWS.items():
        fit = fits.architecture_fits[arch]
        assert fit.n_points == 12 and fit.r2 > 0.98
        assert fit.params["q_inf"] == pytest.approx(q_inf, abs=0.03)
    assert "Q(R)" in fits.fits and fits.fits["Q(R)"].n_points == 36


def test_an_architecture_with_too_few_distinct_rankme_values_says_why():
    table = _table()
    table = table[(table["arch"] != "mae") | (table["trial"] == "mae-0")].copy()
    table.loc[table["arch"] == "mae", "checkpoint_points"] = [{100: {"rankme": 70.0, "q": 0.5}}]
    fits = fit_study_laws(table, n_bootstrap=0, grid="arch")
    assert "mae" not in fits.architecture_fits
    assert "only 1 distinct RankMe value(s)" in fits.architecture_skipped["mae"]


def test_table_v_analogue_reads_base_and_large_and_sits_beside_the_papers(study, tmp_path):
    table, fits = study
    scales = architecture_scale_table(table)
    hubert = scales.set_index("arch").loc["hubert"]
    base_trial = table[(table["arch"] == "hubert") & (table["scale"] == "base")].iloc[0]
    assert hubert["base_rankme"] == pytest.approx(base_trial["rankme"]) and hubert["base_n"] == 1
    markdown = study_markdown("archs", table, fits, list(study_figures(table, fits)))
    assert "## Per architecture (Sec. IV-G, Fig. 7, Table V)" in markdown
    paper_base = PAPER_TABLE_V["hubert"]["base"]
    assert re.search(
        rf"\| hubert \| {base_trial['rankme']:.2f} / {base_trial['q']:.4f} \| .* \| "
        rf"{paper_base[0]:.2f} / {paper_base[1]:.4f} \|",
        markdown,
    )
    # Table V's use, checked: here wav2vec2's Base has the lowest R (46.8) but not the lowest Q
    base = table[table["scale"] == "base"]
    by_r = " < ".join(base.sort_values("rankme")["arch"])
    by_q = " < ".join(base.sort_values("q")["arch"])
    assert (by_r, by_q) == ("wav2vec2 < hubert < mae", "hubert < wav2vec2 < mae")
    assert f"ordering the architectures by RankMe ({by_r}) differs from ordering them by Q ({by_q})" in markdown
    assert "quality_vs_rankme_by_architecture.png" in study_figures(table, fits)


def test_a_single_architecture_study_has_no_per_architecture_section():
    table = _table()
    table = table[table["arch"] == "mae"]
    fits = fit_study_laws(table, n_bootstrap=0)
    assert not fits.architecture_fits and not fits.architecture_skipped
    assert "Per architecture" not in study_markdown("one", table, fits, [])


def test_the_arch_grid_marks_table_v_points_and_names_every_family():
    for profile in ("paper", "cpu_default"):
        trials = expand_grids("arch", profile=profile)
        families = {t.arch for t in trials}
        assert {
            "ssast",
            "hubert",
            "wav2vec2",
            "wav2vec2-conformer",
            "mae",
            "audiomae++",
            "axlstm",
            "crossmae",
        } == families
        for arch in ("hubert", "wav2vec2", "mae"):  # Table V's rows have both columns
            assert {t.scale for t in trials if t.arch == arch} >= {"base", "large"}
    paper = {t.name: t for t in expand_grids("arch", profile="paper")}
    assert paper["ssast-base-patch-400"].model_overrides == {"mask_patches": 400}
    assert paper["mae-en1536-12"].scale == "large" and paper["mae-en768-12"].scale == "base"  # Table IV's names
