"""Q(R) on a flat study: the report says plainly that there is no trend, and the study run logs it."""

from __future__ import annotations

import re

import pandas as pd
import pytest

from pipeline.tracking import runs as tracking
from sweeps.record.keys import Q_TREND_TAG, STUDY_EXPERIMENT
from sweeps.record.study import read_study
from sweeps.report.figures import study_figures
from sweeps.report.markdown import study_markdown
from sweeps.report.q_trend import check_q_of_r
from sweeps.report.study_fits import fit_study_laws
from sweeps.report.summary import summary_lines
from sweeps.study.law_analysis import log_study_analysis

MASK_RATIOS = (0.5, 0.6, 0.7, 0.8, 0.9)


def _study_table(rankme, q, half_width) -> pd.DataFrame:
    """Five trials shaped like the CPU default study (RankMe at Table III's fractions of 100 steps, a Q
    interval each)."""
    rows = []
    for ratio, r, quality in zip(MASK_RATIOS, rankme, q):
        rows.append({
            "trial": f"mask{ratio:.2f}", "mask_ratio": ratio, "rankme": r, "q": quality,
            "q_ci_low": quality - half_width, "q_ci_high": quality + half_width, "status": "ok",
            "rankme_by_step": {7: r - 0.4, 14: r - 0.3, 29: r - 0.2, 43: r - 0.1, 100: r},
        })  # fmt: skip
    return pd.DataFrame(rows)


# The CPU default study as measured: Q 0.527-0.540, RankMe 24.76-24.80, two probe seeds (wide intervals).
FLAT = _study_table([24.78, 24.80, 24.76, 24.79, 24.77], [0.540, 0.531, 0.527, 0.536, 0.533], half_width=0.04)
# A study with a trend: RankMe 40-400, Q rising 0.45 -> 0.62 with intervals of +-0.005.
TRENDING = _study_table([40.0, 80.0, 150.0, 250.0, 400.0], [0.45, 0.53, 0.58, 0.60, 0.62], half_width=0.005)


def test_flat_study_has_no_detectable_trend_and_says_why():
    check = check_q_of_r(FLAT, fit_study_laws(FLAT, n_bootstrap=0))
    assert not check.detectable
    assert any("within the points' own 95% intervals" in reason for reason in check.reasons)
    assert any(reason.startswith("RankMe R (pool) spans only 0.16%") for reason in check.reasons)


def test_trending_study_has_a_detectable_trend():
    study = fit_study_laws(TRENDING, n_bootstrap=0)
    assert study.fits["Q(R)"].r2 > 0.9
    check = check_q_of_r(TRENDING, study)
    assert check.detectable and check.reasons == [] and check.caveats == []


def test_a_cloud_whose_fit_has_r2_just_above_zero_has_no_detectable_trend():
    """The default study once read "a trend of Q is detectable" over R² 0.000: checkpoints with R
    spread 26-55 and Q 0.54-0.58 in no order. Ranks find no trend where R² > 0 said nothing."""
    rankme = [45.0, 53.5, 33.3, 39.0, 44.0]  # the first points of that study
    quality = [0.575, 0.565, 0.565, 0.564, 0.575]
    cloud = _study_table(rankme, quality, half_width=0.001)  # intervals too narrow to overlap
    study = fit_study_laws(cloud, n_bootstrap=0)
    check = check_q_of_r(cloud, study)
    assert not check.detectable
    (reason,) = [r for r in check.reasons if "Spearman" in r]
    assert re.match(
        r"Q does not rise or fall with RankMe R \(pool\): Spearman's rank correlation [+-]0\.\d\d \(p 0\.\d\d over 5 points\)",
        reason,
    )
    lines = summary_lines(cloud, study)
    assert lines[0].startswith("No detectable trend")
    assert lines[1].startswith("Q(R) fit: not informative (no detectable trend, above); R² ")
    assert "95%" not in lines[1]  # no parameter intervals printed as if they meant something
    figure = study_figures(cloud, study)["quality_vs_rankme.png"]
    legend = figure.axes[0].get_legend_handles_labels()[1]
    assert not any(text.startswith(("fit (R²", "95% band")) for text in legend), legend  # no law through a cloud
    # Said in the legend (below the axes), not in a title that would grow to two lines.
    shown = [text.get_text() for text in figure.axes[0].get_legend().get_texts()]
    assert "no law drawn: no detectable trend" in shown, shown
    trending = fit_study_laws(TRENDING, n_bootstrap=0)
    assert any(text.startswith("fit (R²") for text in study_figures(TRENDING, trending)["quality_vs_rankme.png"]
               .axes[0].get_legend_handles_labels()[1])  # fmt: skip


def test_without_per_trial_intervals_the_noise_check_is_reported_as_not_run():
    table = TRENDING.drop(columns=["q_ci_low", "q_ci_high"])
    check = check_q_of_r(table, fit_study_laws(table, n_bootstrap=0))
    assert check.detectable
    assert "5 of 5 points have no informative 95% interval of Q (not recorded)" in check.verdict()


def test_report_opens_the_q_of_r_section_with_the_verdict_and_shows_each_interval():
    markdown = study_markdown("masks", FLAT, fit_study_laws(FLAT, n_bootstrap=0), [])
    section = markdown.index("## Q(R): quality against RankMe")
    verdict = markdown.index("**No detectable trend: the fitted Q(R) law is not informative.**")
    assert section < verdict < markdown.index("## Fitted laws")
    assert markdown[section:verdict].strip() == "## Q(R): quality against RankMe"
    assert "| mask0.50 | 24.78 | 0.5400 | 0.500-0.580 |" in markdown
    assert not re.search(r"\bnan\b", markdown, re.IGNORECASE)  # every missing number says why


@pytest.mark.parametrize("table,expected", [(FLAT, 0.0), (TRENDING, 1.0)])
def test_study_run_logs_q_trend_detectable(tracking_uri, table, expected):
    run = tracking.start_or_resume_run(tracking_uri=tracking_uri, experiment_name=STUDY_EXPERIMENT, run_name="masks")
    study, _ = log_study_analysis(read_study(tracking_uri, "masks"), table, n_bootstrap=0)
    logged = tracking.read_run(tracking_uri, run.run_id)
    assert logged["metrics"]["q_trend_detectable"][-1][1] == expected
    assert ("No detectable trend" in logged["tags"][Q_TREND_TAG]) == (expected == 0.0)
    # 3 of 5 trials stopped at step 29 of 100 (the first RankMe step at or after 25%): 3 x 71 / 500.
    assert logged["metrics"]["early_stop_replay.steps_saved_fraction"][-1][1] == pytest.approx(0.426)
    if "Q(R)" in study.fits:  # five points: no extrapolation error is logged, and a tag says why
        assert "law.q_r.extrapolation_error" not in logged["metrics"]
        assert logged["tags"]["law.q_r.extrapolation_error.not_logged"].startswith("not computed: 4 points remain")
