"""The study as MLflow shows it (a real SQLite store): a model-training experiment, trial-first child
run names, one RankMe name, the summary as the study run's description, the report's embedded figures
and closing lines whose command works as printed."""

from __future__ import annotations

import base64
import re
from pathlib import Path

import numpy as np
import pytest

from pipeline.tracking import runs as tracking
from sweeps.laws.forms import SaturatingLaw
from sweeps.record.keys import STUDY_EXPERIMENT, child_run_name
from sweeps.record.study import read_study
from sweeps.record.trial import TrialRecord
from sweeps.record.view import SHARED_VIEW_TAG_PREFIX, view_key
from sweeps.study.closing import closing_lines
from sweeps.study.driver import StudyOutcome
from sweeps.study.law_analysis import log_study_analysis
from tests.support.synthetic_trials import TRUE_Q_OF_R

STUDY = "mask_ratio-cpu_default"


def _write_study(uri: str) -> tracking.TrackedRun:
    parent = tracking.start_or_resume_run(tracking_uri=uri, experiment_name=STUDY_EXPERIMENT, run_name=STUDY)
    parent.log_params({"grid": "mask_ratio", "profile": "cpu_default", "probe": "quick"})
    rng = np.random.default_rng(1)
    for ratio in (0.5, 0.6, 0.7, 0.8, 0.9):
        name = f"mask{ratio:.2f}"
        rankme = 20.0 + 30.0 * ratio
        q = float(SaturatingLaw().predict(TRUE_Q_OF_R, rankme)) + rng.normal(0.0, 0.002)
        child = tracking.start_or_resume_run(
            tracking_uri=uri, experiment_name=STUDY_EXPERIMENT, run_name=child_run_name(STUDY, name),
            parent_run_id=parent.run_id,
        )  # fmt: skip
        # Pretraining already logged the training-time pool RankMe at steps 10 and 50.
        child.log_metrics({"rankme": 0.8 * rankme}, step=10)
        child.log_metrics({"rankme": 0.9 * rankme}, step=50)
        TrialRecord(
            trial=name, model_name="mae-debug", arch="mae", n_params=144_672, hours=3.0, flops=1e12 * (1 - 0.3 * ratio),
            mask_ratio=ratio, rankme=rankme, rankme_by_step={10: 0.8 * rankme, 50: 0.9 * rankme, 100: rankme}, q=q,
            q_ci_low=q - 0.6, q_ci_high=q + 0.6, rankme_n=600, rankme_pool="pool1", rankme_history_logged=True,
            task_rankme=3.0 * rankme, probe_seeds=2, coordinates={"mask_ratio": ratio},
        ).write(child)  # fmt: skip
        child.finish()
    return parent


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    uri = f"sqlite:///{tmp_path_factory.mktemp('mlflow_view') / 'mlflow.db'}"
    parent = _write_study(uri)
    record = read_study(uri, STUDY)
    table = record.trial_table
    fits, markdown = log_study_analysis(record, n_bootstrap=20)
    return uri, parent, table, fits, markdown


def test_child_runs_show_the_trial_first_and_are_found_again_by_name(tracking_uri):
    name = child_run_name(STUDY, "mask0.70")
    assert name == "mask0.70@mask_ratio-cpu_default" and name.isascii() and " " not in name
    first = tracking.start_or_resume_run(tracking_uri=tracking_uri, experiment_name=STUDY_EXPERIMENT, run_name=name)
    again = tracking.start_or_resume_run(tracking_uri=tracking_uri, experiment_name=STUDY_EXPERIMENT, run_name=name)
    assert again.run_id == first.run_id  # pretraining resumes its run by this name
    assert child_run_name(STUDY, "mask0.70") != child_run_name("other", "mask0.70")


def test_experiment_opens_on_model_training_runs(study):
    uri = study[0]
    assert tracking.experiment_tags(uri, STUDY_EXPERIMENT)["mlflow.experimentKind"] == "custom_model_development"


def test_one_rankme_name_per_quantity_in_mlflow(study):
    uri, parent, table = study[:3]
    child = next(run for run in tracking.list_child_runs(uri, parent.run_id) if run["params"]["trial"] == "mask0.70")
    assert "eval_rankme" not in child["metrics"]
    assert child["metrics"]["rankme"] == [(10, pytest.approx(0.8 * 41.0)), (50, pytest.approx(0.9 * 41.0)),
                                          (100, pytest.approx(41.0))]  # fmt: skip
    assert child["metrics"]["task_rankme"][-1][1] == pytest.approx(123.0)
    assert child["params"]["grid.mask_ratio"] == "0.7" and child["params"]["probe_seeds"] == "2"
    row = table[table["trial"] == "mask0.70"].iloc[0]
    assert row["rankme"] == pytest.approx(41.0) and row["task_rankme"] == pytest.approx(123.0)


def test_study_run_description_is_the_summary_and_laws_follow_the_grid(study):
    uri, parent, _, fits, _ = study
    assert set(fits.fits) == {"Q(R)"}
    description = tracking.read_run(uri, parent.run_id)["tags"][tracking.RUN_DESCRIPTION_TAG]
    assert "Q(R) fit: q_inf" in description and "R²" in description
    assert re.search(r"best: mask0\.90: Q [\d.]+ \(95% n/a \(2 seeds\)\)", description)
    assert "baselines: none measured for this study" in description  # a synthetic study measures none


def test_report_embeds_its_figures_from_the_same_artifact_folder(study):
    uri, parent, _, _, markdown = study
    artifacts = tracking.list_artifacts(uri, parent.run_id, "laws")
    assert {"laws/report.md", "laws/report.html", "laws/quality_vs_rankme.png"} <= set(artifacts)
    assert "laws/quality_vs_scale.png" not in artifacts  # a mask-ratio study has no scale law
    # MLflow's markdown viewer shows an image only from an absolute URL: the printed UI address.
    src = f"http://127.0.0.1:5000/get-artifact?path=laws%2Fquality_vs_rankme.png&run_uuid={parent.run_id}"
    assert f"![Q(R)]({src})" in markdown and "file: `laws/quality_vs_rankme.png`" in markdown
    assert "](quality_vs_rankme.png)" not in markdown  # a relative link resolves against the UI page: 404
    assert "| mask0.70 | 41.00 |" in markdown and "n/a (2 seeds)" in markdown


def test_the_html_report_carries_its_figures_inside_the_file(study, tmp_path):
    uri, parent = study[:2]
    page = tracking.download_artifacts(uri, parent.run_id, "laws/report.html", tmp_path / "html")
    text = Path(page).read_text()
    figures = re.findall(r'<img alt="([^"]+)" src="data:image/png;base64,([A-Za-z0-9+/=]+)">', text)
    assert [alt for alt, _ in figures][:1] == ["Q(R)"]
    assert all(base64.b64decode(data)[:8] == b"\x89PNG\r\n\x1a\n" for _, data in figures)
    assert "<td>mask0.70</td><td>41.00</td>" in text and "<h2>Figures</h2>" in text


def test_closing_lines_print_summary_and_a_working_mlflow_command(study, tmp_path):
    uri, parent, table, fits, markdown = study
    outcome = StudyOutcome(
        study_name=STUDY, parent_run_id=parent.run_id, tracking_uri=uri, trials_run=list(table["trial"]), trials_skipped=[],
        trials_failed=[], table=table, fits=fits, report_markdown=markdown,
    )  # fmt: skip
    lines = closing_lines(outcome, tracking_uri=uri, bin_dir=tmp_path / "bin")
    text = "\n".join(lines)
    assert f"== study {STUDY} (grid mask_ratio, probe quick) ==" in text
    assert "trials run: 5, skipped (finished earlier): 0, failed: none" in text
    assert "Q(R) fit: q_inf" in text and "baselines: none measured for this study" in text
    experiment_id = tracking.get_or_create_experiment(uri, STUDY_EXPERIMENT)
    assert f"{Path(tmp_path) / 'bin' / 'mlflow'} ui --backend-store-uri {uri} --port 5000" in text
    key = view_key(STUDY)
    table_url = f"http://127.0.0.1:5000/#/experiments/{experiment_id}/runs?workflowType=machine_learning&viewStateShareKey={key}"
    run_url = f"http://127.0.0.1:5000/#/experiments/{experiment_id}/runs/{parent.run_id}"
    assert lines[-4:] == [
        f"  then browse {table_url}",
        f"  charts (Q over steps, Q against RankMe): {table_url}&compareRunsMode=CHART",
        f"  the study run: {run_url}?workflowType=machine_learning",
        f"  the report: {run_url}/artifacts/laws/report.html?workflowType=machine_learning",
    ]
    assert SHARED_VIEW_TAG_PREFIX + key in tracking.experiment_tags(uri, STUDY_EXPERIMENT)


def test_the_description_names_checkpoints_without_at_signs_the_ui_turns_into_links():
    from sweeps.study.law_analysis import description_markdown

    text = description_markdown(["best: mask0.90 @300: Q 0.58", "run mask0.90@mask_ratio-cpu_default"])
    assert text == "best: mask0.90 at step 300: Q 0.58\n\nrun mask0.90@mask_ratio-cpu_default"


def test_law_metrics_are_rounded_for_reading(study):
    uri, parent = study[:2]
    metrics = {key: history[-1][1] for key, history in tracking.read_run(uri, parent.run_id)["metrics"].items()}
    law = {key: value for key, value in metrics.items() if key.startswith("law.q_r.")}
    assert "law.q_r.q_inf" in law and "law.q_r.r2" in law
    assert all(value == float(f"{value:.4g}") for value in law.values()), law


def test_each_figure_is_logged_as_png_and_pdf_and_each_trial_keeps_its_figure_colour_in_the_ui(study, tmp_path):
    from PIL import Image

    from sweeps.record.keys import RUN_COLOUR_TAG
    from sweeps.report.run_colours import trial_colours

    uri, parent, table = study[:3]
    artifacts = set(tracking.list_artifacts(uri, parent.run_id, "laws"))
    assert {"laws/quality_vs_rankme.png", "laws/quality_vs_rankme.pdf"} <= artifacts
    png = tracking.download_artifacts(uri, parent.run_id, "laws/quality_vs_rankme.png", tmp_path / "png")
    with Image.open(png) as image:
        assert min(image.info["dpi"]) >= 199.9 and image.size[0] >= 1200  # a 6.4-inch figure at 200 dpi
    pdf = Path(tracking.download_artifacts(uri, parent.run_id, "laws/quality_vs_rankme.pdf", tmp_path / "pdf"))
    assert pdf.read_bytes()[:5] == b"%PDF-"
    # The UI draws each trial in the colour pinned on its run: the figures' colour.
    pinned = {
        run["params"]["trial"]: run["tags"][RUN_COLOUR_TAG] for run in tracking.list_child_runs(uri, parent.run_id)
    }
    assert pinned == trial_colours(table)
    assert len(set(pinned.values())) == 5


def test_the_best_point_is_marked_on_the_study_run_and_on_its_trial_only(study):
    from sweeps.record.keys import BEST_POINT_TAG, BEST_Q_METRIC, BEST_TRIAL_TAG

    uri, parent, table = study[:3]
    run = tracking.read_run(uri, parent.run_id)
    best = table.loc[table["q"].idxmax()]
    assert run["tags"][BEST_POINT_TAG] == "mask0.90" == best["trial"]  # the summary's "best:" line
    assert run["metrics"][BEST_Q_METRIC][-1][1] == pytest.approx(best["q"])
    marked = {
        child["params"]["trial"]: child["tags"].get(BEST_TRIAL_TAG)
        for child in tracking.list_child_runs(uri, parent.run_id)
    }
    assert marked == {"mask0.50": None, "mask0.60": None, "mask0.70": None, "mask0.80": None, "mask0.90": "true"}
    # A refit that finds another best moves the mark: one trial holds it.
    from sweeps.study.law_analysis import _mark_best_trial

    current = read_study(uri, STUDY).trial_table  # as a refit reads it: the marks as they are now
    assert current["marked_best"].tolist() == [name == "mask0.90" for name in current["trial"]]
    moved = current.assign(q=np.where(current["trial"] == "mask0.50", 0.99, current["q"]), checkpoint_points=None)
    _mark_best_trial(tracking.attach_run(uri, parent.run_id), moved)
    marked = {
        child["params"]["trial"]: child["tags"].get(BEST_TRIAL_TAG)
        for child in tracking.list_child_runs(uri, parent.run_id)
    }
    assert [trial for trial, mark in marked.items() if mark] == ["mask0.50"]
    # As it was, for the module's other tests.
    _mark_best_trial(tracking.attach_run(uri, parent.run_id), read_study(uri, STUDY).trial_table)
