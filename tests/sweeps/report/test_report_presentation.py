"""What a researcher sees in a study's report, figures and closing lines: informative intervals only,
no law along an axis the grid does not vary, one RankMe name, readable figures, embedded images."""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from matplotlib.collections import PolyCollection

from sweeps.laws.forms import SaturatingLaw
from sweeps.record.baseline import BaselineRecord
from sweeps.report.comparisons import Comparisons
from sweeps.report.figures import study_figures
from sweeps.report.intervals import informative_interval
from sweeps.report.markdown import figures_markdown, study_markdown
from sweeps.report.study_fits import fit_study_laws
from sweeps.report.study_info import StudyInfo
from sweeps.report.summary import mlflow_ui_lines, summary_lines
from tests.support.synthetic_trials import TRUE_Q_OF_R

REPO_ROOT = Path(__file__).resolve().parents[3]
MASK_RATIOS = (0.5, 0.6, 0.7, 0.8, 0.9)
STEPS = (0, 25, 50, 100)
# The default tasks' kNN scores of the naive features (benchmarks/q_noise_floor.py), as a realistic scale.
TASK_SCORES = {"language_real": 0.709, "language_synthetic": 0.267, "spoken_digits": 0.705, "pitch": 0.757,
               "instrument_family": 0.395, "drum_type": 0.681, "speaker_count": 0.465}  # fmt: skip


def _mask_ratio_checkpoints(seed_spread: float = 0.8) -> pd.DataFrame:
    """5 mask-ratio trials x 4 checkpoints, RankMe 24-31 (under a decade), Q on the synthetic Q(R)
    law; FLOPs differ slightly with the mask ratio, as in the real study; 2-seed intervals."""
    rng = np.random.default_rng(3)
    rows = []
    for ratio in MASK_RATIOS:
        for step in STEPS:
            rankme = 24.0 + 7.0 * ratio * step / 100 + rng.normal(0.0, 0.05)
            q = float(SaturatingLaw().predict(TRUE_Q_OF_R, rankme)) + rng.normal(0.0, 0.002)
            rows.append({
                "trial": f"mask{ratio:.2f}", "step": step, "mask_ratio": ratio, "n_params": 144_672, "hours": 3.0,
                "flops": 1e12 * (1.0 - 0.3 * ratio) * max(step, 1), "arch": "mae", "rankme": rankme, "rankme_n": 600,
                "q": q, "q_ci_low": q - seed_spread, "q_ci_high": q + seed_spread, "status": "ok",
                **{f"score/{task}": naive + (0.05 if i % 2 else -0.05) for i, (task, naive) in enumerate(TASK_SCORES.items())},
            })  # fmt: skip
    return pd.DataFrame(rows)


INFO = StudyInfo(name="mask_ratio-cpu_default", grid="mask_ratio", probe="quick", probe_seeds=2)


@pytest.mark.parametrize(
    "low,high,seeds,probe,expected",
    [
        (-0.29, 1.34, 2, "quick", "n/a (2 seeds)"),  # the default study's interval over 2 seeds
        (0.51, 0.55, 2, "quick", "n/a (2 seeds)"),  # narrow by luck: 2 seeds still cannot tell
        (-0.05, 0.95, 5, "hear", "n/a (wider than Q's range [0, 1])"),  # never clipped into range
        (0.53, 0.53, 3, "linear", "n/a (deterministic probe)"),
        (0.53, 0.53, 3, "hear", "n/a (zero width)"),
        (math.nan, math.nan, 1, "hear", "n/a (1 seed)"),
        (math.nan, math.nan, None, "hear", "n/a (not recorded)"),
        (0.51, 0.55, 3, "hear", "0.510-0.550"),
        (0.51, 0.55, None, "", "0.510-0.550"),  # seeds unknown: judged on the interval itself
    ],
)
def test_informative_interval_rule(low, high, seeds, probe, expected):
    verdict = informative_interval(low, high, seeds, probe)
    assert verdict.cell() == expected
    assert (verdict.bounds is None) == expected.startswith("n/a")


@pytest.mark.parametrize(
    "low,high,expected",
    [
        (0.541, 0.573, "0.541-0.573"),  # a kNN Q over 1 seed: the test-clip bootstrap is what informs
        (math.nan, math.nan, "n/a (not recorded)"),
        (-0.02, 0.3, "n/a (wider than Q's range [0, 1])"),
    ],
)
def test_a_test_clip_interval_of_a_deterministic_probe_is_judged_on_its_own(low, high, expected):
    verdict = informative_interval(low, high, 1, "knn", over="test clips")
    assert verdict.cell() == expected
    assert (verdict.bounds is None) == expected.startswith("n/a")


def test_report_prints_no_uninformative_interval():
    table = _mask_ratio_checkpoints()
    markdown = study_markdown("masks", table, fit_study_laws(table, n_bootstrap=0, grid="mask_ratio"), [], info=INFO)
    assert "| mask0.70 @100 | " in markdown and "| n/a (2 seeds) |" in markdown
    assert not re.search(r"\| -0\.\d+-", markdown)  # no interval reaching below 0
    assert "points have no informative 95% interval of Q (2 seeds)" in markdown


def test_mask_ratio_study_fits_q_of_r_only_and_says_why_the_others_were_skipped():
    table = _mask_ratio_checkpoints()
    assert fit_study_laws(table, n_bootstrap=0).fits.keys() >= {"Q(R)", "Q(C)"}  # FLOPs vary by side effect
    study = fit_study_laws(table, n_bootstrap=0, grid="mask_ratio")
    assert set(study.fits) == {"Q(R)"}
    assert study.skipped["Q(C)"].startswith("the grid does not vary compute (grid: mask_ratio)")
    assert study.skipped["Q(N)"].startswith("the grid does not vary model size")
    assert study.skipped["Q(D)"].startswith("the grid does not vary data volume")
    assert study.skipped["Q(N,D)"].startswith("the grid does not vary both model size and data volume")
    assert study.q_c_frontier is None
    markdown = study_markdown("masks", table, study, [], info=INFO)
    assert "- Q(C) not fitted: the grid does not vary compute (grid: mask_ratio)" in markdown
    assert "quality_vs_scale.png" not in study_figures(table, study, INFO)
    # A size x compute grid fits Q(C) on its frontier; Q(D) still not.
    both = fit_study_laws(table, n_bootstrap=0, grid="size,compute")
    assert "Q(C)" in both.fits and "Q(D)" in both.skipped


def test_one_rankme_name_in_report_and_figures():
    table = _mask_ratio_checkpoints()
    table["rankme_by_step"] = [{10: r - 1.0, 50: r - 0.5, 100: r} for r in table["rankme"]]
    study = fit_study_laws(table, n_bootstrap=0, grid="mask_ratio")
    markdown = study_markdown("masks", table, study, [], info=INFO)
    assert "| trial | RankMe R (pool, N=600) | Q | Q 95% interval |" in markdown
    assert "Pearson r between RankMe R (pool, N=600) part-way through training (the R of Q(R)" in markdown
    figures = study_figures(table, study, INFO)
    assert figures["quality_vs_rankme.png"].axes[0].get_xlabel() == "RankMe R (pool, N=600)"
    early = figures["early_rankme_vs_final_q.png"].axes[0].get_xlabel()
    assert early == "RankMe R (pool, N=600) part-way through training"


def _texts(ax) -> list[str]:
    return [text.get_text() for text in ax.texts]


def _legend_texts(ax) -> list[str]:
    return [text.get_text() for text in ax.get_legend().get_texts()] if ax.get_legend() else []


def test_early_prediction_draws_each_r_with_its_interval_and_says_when_every_one_covers_zero():
    table = _mask_ratio_checkpoints()
    rng = np.random.default_rng(2)
    # Early RankMe unrelated to the final Q: with 5 trials every Fisher interval spans r = 0.
    table["rankme_by_step"] = [{10: float(rng.uniform(10, 20)), 50: float(rng.uniform(10, 20)), 100: r}
                               for r in table["rankme"]]  # fmt: skip
    study = fit_study_laws(table, n_bootstrap=0, grid="mask_ratio")
    r_ax = study_figures(table, study, INFO)["early_rankme_vs_final_q.png"].axes[1]
    assert [c.get_label() for c in r_ax.collections if isinstance(c, PolyCollection)] == ["95% interval (Fisher z)"]
    # The note is a legend entry below the axes: it prints over no data.
    assert any(text.startswith("every 95% interval covers r = 0 (") for text in _legend_texts(r_ax))
    # Early RankMe ordered as the final Q, on 40 trials: the intervals exclude 0 and no note is drawn.
    many = pd.concat([table] * 8, ignore_index=True)
    many["trial"] = [f"t{i}" for i in range(len(many))]
    many["q"] = np.linspace(0.4, 0.6, len(many))
    many["rankme_by_step"] = [{10: 10 + 5 * q + 0.01 * i, 50: 12 + 5 * q, 100: 14 + 5 * q}
                              for i, q in enumerate(many["q"])]  # fmt: skip
    r_ax = study_figures(many, fit_study_laws(many, n_bootstrap=0, grid="mask_ratio"), INFO)[
        "early_rankme_vs_final_q.png"
    ].axes[1]
    assert [c.get_label() for c in r_ax.collections if isinstance(c, PolyCollection)] == ["95% interval (Fisher z)"]
    assert not any("covers r = 0" in text for text in _legend_texts(r_ax) + _texts(r_ax))


def _band_x_range(ax) -> tuple[float, float]:
    bands = [c for c in ax.collections if isinstance(c, PolyCollection) and c.get_label().endswith("band")]
    vertices = np.concatenate([path.vertices for band in bands for path in band.get_paths()])
    return float(vertices[:, 0].min()), float(vertices[:, 0].max())


def test_q_of_r_figure_is_readable(tmp_path):
    table = _mask_ratio_checkpoints()
    study = fit_study_laws(table, n_bootstrap=20, grid="mask_ratio")
    figure = study_figures(table, study, INFO)["quality_vs_rankme.png"]
    figure.savefig(tmp_path / "q_r.png")
    assert (tmp_path / "q_r.png").stat().st_size > 5_000
    ax = figure.axes[0]
    labels = [label.get_text() for label in ax.get_xticklabels() if label.get_text()]
    assert len(labels) >= 2 and all(re.fullmatch(r"\d+(\.\d+)?", text) for text in labels), labels
    assert not [label.get_text() for label in ax.get_xticklabels(minor=True) if label.get_text()]
    low, high = _band_x_range(ax)
    assert low >= table["rankme"].min() - 1e-9 and high <= table["rankme"].max() + 1e-9
    assert sorted(text.get_text() for text in ax.texts) == [f"mask{r:.2f}" for r in MASK_RATIOS]
    assert len(ax.lines) >= len(MASK_RATIOS)  # each trial's checkpoints joined, plus the fit
    handles, names = ax.get_legend_handles_labels()
    assert "final checkpoint" in names and "Q 95% interval" not in names  # 2 seeds: no error bars
    # One line: the study's name and grid are in the file's metadata (sweeps.report.figure_files).
    assert ax.get_title() == "Q(R): 20 points from 5 trials, quick probe"
    assert ax.get_ylabel() == "quality Q (mean of 7 task scores)"


def test_the_measured_baselines_are_lines_on_the_q_of_r_figure():
    table = _mask_ratio_checkpoints()
    baselines = {"naive features": 0.568, "random initialisation": 0.558, "positive control": 0.589}
    figure = study_figures(table, fit_study_laws(table, n_bootstrap=0, grid="mask_ratio"), INFO, baselines=baselines)
    ax = figure["quality_vs_rankme.png"].axes[0]
    names = ax.get_legend_handles_labels()[1]
    for name, q in baselines.items():
        assert f"{name} (Q {q:.3f})" in names
    drawn = {round(line.get_ydata()[0], 3) for line in ax.lines if len(set(line.get_ydata())) == 1}
    assert set(baselines.values()) <= drawn


def test_informative_intervals_are_drawn_as_error_bars():
    table = _mask_ratio_checkpoints(seed_spread=0.01)
    info = StudyInfo(name="masks", grid="mask_ratio", probe="hear", probe_seeds=3)
    figure = study_figures(table, fit_study_laws(table, n_bootstrap=0, grid="mask_ratio"), info)[
        "quality_vs_rankme.png"
    ]
    assert "Q 95% interval" in figure.axes[0].get_legend_handles_labels()[1]


def test_report_embeds_figures_as_images_with_each_file_named():
    sources = {"quality_vs_rankme.png": "get-artifact?path=laws%2Fquality_vs_rankme.png&run_uuid=abc"}
    lines = figures_markdown(["quality_vs_rankme.png", "early_rankme_vs_final_q.png"], sources)
    assert lines[0] == "![Q(R)](get-artifact?path=laws%2Fquality_vs_rankme.png&run_uuid=abc)"
    assert "file: `laws/quality_vs_rankme.png`" in lines
    assert "![early RankMe vs final Q](early_rankme_vs_final_q.png)" in lines  # relative by default


def test_summary_lines_state_fit_verdict_best_initialisation_and_baseline():
    table = _mask_ratio_checkpoints()
    lines = summary_lines(table, fit_study_laws(table, n_bootstrap=20, grid="mask_ratio"), INFO)
    text = "\n".join(lines)
    # Q_inf's interval either ends below 1 or runs to the bound and is said to (here it does: 0.376-1).
    q_inf = r"q_inf [\d.]+ \(95% [\d.]+(-[\d.]+| to the bound 1: no ceiling established)\)"
    assert re.search(rf"Q\(R\) fit: {q_inf}, x_c .*; R² [\d.]+ over 20 points", text)
    assert "A trend of Q is detectable for Q(R)" in lines[0] or "No detectable trend" in lines[0]
    assert re.search(r"best: mask0\.90 @100: Q [\d.]+ \(95% n/a \(2 seeds\)\), RankMe R \(pool, N=600\) [\d.]+", text)
    # The winner's curse said with the count it was picked from: 5 trials x 4 checkpoints.
    assert re.search(r"^best: .*; the largest Q of 20 points, so it reads high by selection$", text, re.M)
    assert re.search(r"vs initialisation: Q [\d.]+ is above its step-0 Q [\d.]+ \(95% n/a \(2 seeds\)\): \+", text)
    assert "noise of the intervals" not in text  # no informative interval: no verdict on the noise either
    assert re.search(r"R at initialisation [\d.]+, at the best point [\d.]+", text)
    assert "baselines: none measured for this study" in text  # no constant table stands in for them


def test_summary_judges_the_gain_over_initialisation_against_the_test_clip_noise():
    # kNN rows (1 seed) with test-clip intervals: +0.006 against a noise of +-0.026 is within it.
    table = _mask_ratio_checkpoints().assign(q_interval_over="test clips")
    table["q"] += 0.3  # every interval inside [0, 1]
    table["q_ci_low"], table["q_ci_high"] = table["q"] - 0.019, table["q"] + 0.019
    knn = StudyInfo(name="masks", grid="mask_ratio", probe="knn", probe_seeds=1)
    best = table["q"].idxmax()
    initial = table.index[(table["trial"] == table.loc[best, "trial"]) & (table["step"] == 0)][0]
    table.loc[initial, "q"] = table.loc[best, "q"] - 0.006
    text = "\n".join(summary_lines(table, fit_study_laws(table, n_bootstrap=0, grid="mask_ratio"), knn))
    assert re.search(
        r"\(95% [\d.]+-[\d.]+\): \+0\.0060; within the noise of the intervals \(unpaired: \+-0\.026\d\)", text
    )
    table.loc[initial, "q"] = table.loc[best, "q"] - 0.06
    text = "\n".join(summary_lines(table, fit_study_laws(table, n_bootstrap=0, grid="mask_ratio"), knn))
    assert "+0.0600; beyond the noise of the intervals" in text


def _paired_study(gain: float, noise: float):
    """A kNN study whose best point beats its step 0 by `gain` on paired replicates sharing test-clip
    luck of spread `noise`, and three baselines, each with replicates on the same resamples."""
    rng = np.random.default_rng(0)
    table = _mask_ratio_checkpoints().assign(q_interval_over="test clips", run_id=lambda t: "run-" + t["trial"])
    table["q"] += 0.3
    table["q_ci_low"], table["q_ci_high"] = table["q"] - 0.019, table["q"] + 0.019
    best = table["q"].idxmax()
    trial = table.loc[best, "trial"]
    initial = table.index[(table["trial"] == trial) & (table["step"] == 0)][0]
    table.loc[initial, "q"] = table.loc[best, "q"] - gain
    luck = rng.normal(0.0, noise, 1000)  # the test split's luck: shared by every source on a resample
    own = rng.normal(0.0, 0.002, (5, 1000))  # what does not cancel
    q_best, q_init = table.loc[best, "q"], table.loc[initial, "q"]
    replicates = {f"run-{trial}": {100: tuple(q_best + luck + own[0]), 0: tuple(q_init + luck + own[1])}}
    baselines = {"naive": q_best + 0.01, "initialisation": q_init - 0.002, "control": q_best + 0.05}
    records = tuple(
        BaselineRecord(name=name, q=q, description=f"{name} here", task_scores=dict.fromkeys(TASK_SCORES, 0.1))
        for name, q in baselines.items()
    )
    comparisons = Comparisons(
        baselines=records,
        baseline_replicates={name: tuple(q + luck + own[2 + i]) for i, (name, q) in enumerate(baselines.items())},
        replicates_of=lambda run_id: replicates.get(run_id, {}),
    )
    return table, comparisons


def test_summary_pairs_the_best_point_with_its_initialisation_and_the_measured_baselines():
    knn = StudyInfo(name="masks", grid="mask_ratio", probe="knn", probe_seeds=1)
    # +0.012 against test-clip luck of +-0.03: unpaired intervals could not tell; paired they can.
    table, comparisons = _paired_study(gain=0.012, noise=0.03)
    text = "\n".join(summary_lines(table, fit_study_laws(table, n_bootstrap=0, grid="mask_ratio"), knn, comparisons))
    match = re.search(r"vs its initialisation \(step 0 of the same trial, Q [\d.]+\): \+0\.0120 \(paired 95% "
                      r"\+(0\.0[01]\d\d) to \+(0\.01\d\d): above the noise\)", text)  # fmt: skip
    assert match, text
    assert 0.012 - 0.007 < float(match[1]) < 0.012 < float(match[2]) < 0.012 + 0.007
    assert "naive features (naive here): Q" in text and "best - it -0.0100 (paired 95% -0.01" in text
    assert "below, beyond the noise" in text  # the naive features and the control are above the best point
    assert "best above it on 7 of 7 tasks" in text
    assert re.search(r"Q's headroom on these tasks \(control - initialisation\): \+0\.0\d+ \(paired 95%", text)
    # A gain smaller than what does not cancel stays within the noise.
    table, comparisons = _paired_study(gain=0.001, noise=0.03)
    text = "\n".join(summary_lines(table, fit_study_laws(table, n_bootstrap=0, grid="mask_ratio"), knn, comparisons))
    assert re.search(
        r"vs its initialisation .*: \+0\.0010 \(paired 95% -0\.00\d+ to \+0\.00\d+: within the noise\)", text
    )


def test_mlflow_command_works_as_printed(tmp_path):
    lines = mlflow_ui_lines("sqlite:////data/mlflow.db", "3", tmp_path / "venv" / "bin", view_key="audioscale-s")
    assert lines[0].endswith(f"{tmp_path}/venv/bin/mlflow ui --backend-store-uri sqlite:////data/mlflow.db --port 5000")
    url = "http://127.0.0.1:5000/#/experiments/3/runs?workflowType=machine_learning&viewStateShareKey=audioscale-s"
    assert lines[1].strip() == f"then browse {url}"
    # A tracking server serves the UI: its own address, no command to start one.
    (line,) = mlflow_ui_lines("http://mlflow.lab:5000", "3", tmp_path, view_key="audioscale-s")
    assert line.endswith(
        "http://mlflow.lab:5000/#/experiments/3/runs?workflowType=machine_learning&viewStateShareKey=audioscale-s"
    )


def test_labels_of_crowded_final_checkpoints_do_not_overlap():
    # The default study's five final checkpoints sit within 0.02 of Q and 2 of R of each other.
    finals = [(10.5, 0.410), (10.8, 0.415), (11.0, 0.420), (11.2, 0.428), (12.1, 0.425)]
    rows = [{"trial": f"mask0.{5 + i}0", "step": step, "rankme": r if step else 26.5, "q": q if step else 0.557,
             "n_params": 1, "hours": 1.0, "flops": 1.0, "status": "ok"}
            for i, (r, q) in enumerate(finals) for step in (0, 300)]  # fmt: skip
    table = pd.DataFrame(rows)
    figure = study_figures(table, fit_study_laws(table, n_bootstrap=0, grid="mask_ratio"), INFO)[
        "quality_vs_rankme.png"
    ]
    ax = figure.axes[0]
    renderer = figure.canvas.get_renderer()
    boxes = [text.get_window_extent(renderer) for text in ax.texts]
    assert len(boxes) == 5
    frame = ax.get_window_extent(renderer)
    for i, box in enumerate(boxes):
        assert frame.x0 <= box.x0 and box.x1 <= frame.x1 and frame.y0 <= box.y0 and box.y1 <= frame.y1
        assert not any(box.overlaps(other) for other in boxes[i + 1 :]), [t.get_text() for t in ax.texts]


def test_fit_line_says_no_ceiling_when_every_resample_puts_q_inf_at_1():
    from sweeps.laws.fits import fit_saturating
    from sweeps.report.study_fits import StudyFits
    from sweeps.report.summary import fit_line

    # A rising power law with no ceiling below 1: every resample puts Q_inf at its bound, which the
    # second default-study run printed as "q_inf 1 (95% 1-1)", a precise-looking ceiling.
    rankme = np.repeat(np.geomspace(10.0, 27.0, 8), 5)
    q = 1.0 - (2.2 / rankme) ** 0.33 + np.random.default_rng(0).normal(0.0, 0.002, rankme.size)
    fit = fit_saturating(rankme, q, groups=np.arange(rankme.size) % 5, n_bootstrap=20, extrapolate=False)
    assert fit.params["q_inf"] == pytest.approx(1.0) and fit.ci["q_inf"][0] == pytest.approx(1.0)
    line = fit_line(StudyFits(fits={"Q(R)": fit}, skipped={}, n_trials_used=5, n_trials_failed=0))
    assert "q_inf 1 (every resample at the bound 1: no ceiling identified), x_c " in line
    assert re.search(r"x_c [\d.]+ \(95% [\d.]+-[\d.]+\)", line)


def test_a_study_scored_at_the_end_only_pairs_its_last_step_with_the_baselines():
    # --eval-checkpoints final: one row per trial and no step column; its replicates sit at the last step.
    table, comparisons = _paired_study(gain=0.012, noise=0.03)
    last = table[table["step"] == max(STEPS)].drop(columns=["step"]).reset_index(drop=True)
    best_trial = last.loc[last["q"].idxmax(), "trial"]
    replicates = comparisons.replicates_of(f"run-{best_trial}")
    knn = StudyInfo(name="masks", grid="mask_ratio", probe="knn", probe_seeds=1)
    text = "\n".join(summary_lines(last, fit_study_laws(last, n_bootstrap=0, grid="mask_ratio"), knn, comparisons))
    assert max(replicates) == max(STEPS)  # the best trial logged its last step's replicates
    assert "vs its initialisation" not in text  # no step 0 to compare with
    assert re.search(r"naive features \(naive here\): Q [\d.]+; best - it [-+][\d.]+ \(paired 95%", text), text
