"""A study's trials written to MLflow, read back into a trial table, refitted and logged."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pytest

from pipeline.tracking import runs as tracking
from sweeps.laws.forms import SaturatingLaw
from sweeps.record.keys import ON_FRONTIER_METRIC, Q_C_FRONTIER_TAG
from sweeps.record.study import read_study
from sweeps.record.trial import TrialRecord, mark_trial_failed
from sweeps.study.law_analysis import refit_study
from sweeps.study.law_metrics import metric_key
from tests.support.study_runs import start_study_run, start_trial_run

REPO_ROOT = Path(__file__).resolve().parents[3]


def _write_mask_ratio_study(tracking_uri: str, study_name: str) -> str:
    parent = start_study_run(tracking_uri, study_name)
    rng = np.random.default_rng(0)
    for ratio in (0.5, 0.6, 0.7, 0.8, 0.9, 0.95):
        rankme = 40.0 + 400.0 * ratio**2
        q = float(SaturatingLaw().predict({"q_inf": 0.7, "x_c": 15.0, "alpha": 0.8}, rankme)) + rng.normal(0.0, 0.003)
        child = start_trial_run(tracking_uri, parent, study_name, f"mask{ratio:.2f}")
        TrialRecord(
            trial=f"mask{ratio:.2f}", model_name="mae-debug", arch="mae", n_params=144672, hours=3.0, flops=1e12,
            mask_ratio=ratio, rankme=rankme, rankme_by_step={50: rankme * 0.7, 100: rankme}, q=q, task_scores={"esc50": q - 0.1},
            q_ci_low=q - 0.01, q_ci_high=q + 0.01, rankme_n=600, rankme_pool="pool1", rankme_capped=ratio > 0.9,
        ).write(child)  # fmt: skip
        child.finish()
    crashed = start_trial_run(tracking_uri, parent, study_name, "mask0.30")
    mark_trial_failed(crashed, "RuntimeError: loss is NaN")
    return parent.run_id


@pytest.fixture(scope="module")
def study_store(tmp_path_factory):
    """One MLflow store holding one written study (SQLite run creation is slow: write it once)."""
    uri = f"sqlite:///{tmp_path_factory.mktemp('study_store') / 'mlflow.db'}"
    return uri, _write_mask_ratio_study(uri, "masks")


def test_trial_table_round_trips_through_mlflow(study_store):
    tracking_uri, parent_run_id = study_store
    table = read_study(tracking_uri, "masks", run_id=parent_run_id).trial_table
    assert len(table) == 7
    assert list(table["status"]).count("failed") == 1
    ok = table[table["status"] == "ok"].sort_values("mask_ratio")
    assert ok["mask_ratio"].tolist() == [0.5, 0.6, 0.7, 0.8, 0.9, 0.95]
    assert ok["rankme_by_step"].iloc[0] == {50: pytest.approx(0.7 * (40 + 100)), 100: pytest.approx(140.0)}
    assert ok["score/esc50"].iloc[0] == pytest.approx(ok["q"].iloc[0] - 0.1)
    assert (ok["q_ci_high"] - ok["q_ci_low"]).to_numpy() == pytest.approx([0.02] * 6)
    assert np.isnan(table.loc[table["status"] == "failed", "q_ci_low"]).all()
    # Every R of the study records its pool and N, and the capped flag (N < 8 K) comes back.
    assert set(ok["rankme_pool"]) == {"pool1"} and set(ok["rankme_n"]) == {600.0}
    assert ok["rankme_capped"].tolist() == [False] * 5 + [True]


def test_refit_logs_laws_figures_and_report_to_the_study_run(study_store):
    tracking_uri, parent_run_id = study_store
    markdown = refit_study("masks", tracking_uri=tracking_uri, n_bootstrap=20)
    assert "1 failed or unscored row(s) were left out" in markdown and "| Q(R) |" in markdown
    artifacts = tracking.list_artifacts(tracking_uri, parent_run_id, "laws")
    assert {"laws/fits.json", "laws/report.md", "laws/quality_vs_rankme.png"} <= set(artifacts)
    metrics = tracking.read_run(tracking_uri, parent_run_id)["metrics"]
    assert metrics[f"law.{metric_key('Q(R)')}.alpha"][-1][1] == pytest.approx(0.8, abs=0.2)
    assert metrics["q_trend_detectable"][-1][1] == 1.0  # Q 0.53-0.63, each trial known to +-0.01
    assert "## Q(R): quality against RankMe" in markdown and "A trend of Q is detectable" in markdown
    # Sec. IV-H: the esc50 score's own Q(R) law, its parameters as metrics and its class as a tag.
    logged = tracking.read_run(tracking_uri, parent_run_id)
    assert "task_law/esc50/q_inf" in metrics
    assert logged["tags"]["task_law/esc50/class"] in {"saturating", "still rising"}


def test_a_refit_leaves_no_figure_open(study_store):
    """pyplot keeps a figure until it is closed: each refit left its 2-3 figures behind, and a
    process refitting many studies held them all."""
    tracking_uri, _ = study_store
    plt.close("all")
    refit_study("masks", tracking_uri=tracking_uri, n_bootstrap=0)
    assert plt.get_fignums() == []


def test_refit_marks_the_q_c_frontier_on_the_trial_runs(study_store):
    tracking_uri, parent_run_id = study_store
    refit_study("masks", tracking_uri=tracking_uri, n_bootstrap=0)
    children = tracking.list_child_runs(tracking_uri, parent_run_id)
    ok = [c for c in children if c["params"].get("mask_ratio")]
    flags = {c["params"]["trial"]: c["metrics"][ON_FRONTIER_METRIC][-1][1] for c in ok}
    # Every trial used the same compute (1e12 FLOPs): only the best Q is on the frontier.
    best = max(ok, key=lambda c: c["metrics"]["q"][-1][1])["params"]["trial"]
    assert flags == {name: float(name == best) for name in flags}
    assert tracking.read_run(tracking_uri, parent_run_id)["tags"][Q_C_FRONTIER_TAG] == best


def test_refit_of_an_unknown_study_names_it(study_store):
    tracking_uri, _ = study_store
    with pytest.raises(ValueError, match="no study run named 'missing'"):
        refit_study("missing", tracking_uri=tracking_uri)


def test_laws_cli_refits_without_retraining(study_store):
    tracking_uri, _ = study_store
    completed = subprocess.run(
        [
            sys.executable,
            "-m",
            "sweeps.laws",
            "--study",
            "masks",
            "--tracking-uri",
            tracking_uri,
            "--n-bootstrap",
            "10",
        ],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
        timeout=300,
    )
    assert completed.returncode == 0, completed.stderr[-2000:]
    assert "# Scaling study `masks`" in completed.stdout


def test_law_names_become_valid_mlflow_metric_keys():
    assert metric_key("Q(N,D)") == "q_n_d" and metric_key("Q(R)") == "q_r"
