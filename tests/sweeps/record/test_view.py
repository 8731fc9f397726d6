"""The study's MLflow view: a shared-view tag the UI opens by key, whose filter and sort are valid
MLflow search syntax that select exactly the study's children (checked on a real store; the browser
check is scripts/check_mlflow_view.py)."""

from __future__ import annotations

import json

import mlflow

from pipeline.tracking import runs as tracking
from sweeps.record.keys import STUDY_EXPERIMENT, child_run_name
from sweeps.record.view import SHARED_VIEW_TAG_PREFIX, run_page_url, study_view_url, view_key, write_study_view


def test_the_view_shows_the_study_children_with_q_r_grid_and_status(tracking_uri):
    experiment_id = tracking.get_or_create_experiment(tracking_uri, STUDY_EXPERIMENT)
    runs = {}
    for study in ("masks", "other"):
        parent = tracking.start_or_resume_run(
            tracking_uri=tracking_uri, experiment_name=STUDY_EXPERIMENT, run_name=study
        )
        runs[study] = parent
        for ratio in (0.9, 0.5, 0.7):
            child = tracking.start_or_resume_run(
                tracking_uri=tracking_uri, experiment_name=STUDY_EXPERIMENT,
                run_name=child_run_name(study, f"mask{ratio}"), parent_run_id=parent.run_id,
            )  # fmt: skip
            child.log_params({"grid.mask_ratio": ratio})
            child.finish()
    key = write_study_view(
        tracking_uri, experiment_id, study_name="masks", study_run_id=runs["masks"].run_id, grid_names=["mask_ratio"]
    )
    assert key == view_key("masks") == "audioscale-masks"
    tags = mlflow.MlflowClient(tracking_uri).get_experiment(experiment_id).tags
    state = json.loads(tags[SHARED_VIEW_TAG_PREFIX + key])
    assert state["selectedColumns"] == [
        "metrics.`q`", "metrics.`q_ci_low`", "metrics.`q_ci_high`", "metrics.`rankme`", "params.`grid.mask_ratio`",
        "tags.`audioscale.best`", "tags.`audioscale.trial_status`", "metrics.`baseline.q`",
    ]  # fmt: skip
    # The chart view: Q over steps per trial and Q against RankMe, in a section of their own.
    charts = {chart["type"]: chart for chart in state["compareRunCharts"]}
    assert charts["LINE"]["metricKey"] == "q" and charts["LINE"]["xAxisKey"] == "step"
    assert (charts["SCATTER"]["xaxis"]["key"], charts["SCATTER"]["yaxis"]["key"]) == ("rankme", "q")
    assert [section["name"] for section in state["compareRunSections"]] == ["Study"]
    assert {chart["metricSectionId"] for chart in charts.values()} == {state["compareRunSections"][0]["uuid"]}
    found = mlflow.MlflowClient(tracking_uri).search_runs(
        [experiment_id], filter_string=state["searchFilter"], order_by=[f"{state['orderByKey']} ASC"]
    )
    assert [run.info.run_name for run in found] == [child_run_name("masks", f"mask{r}") for r in (0.5, 0.7, 0.9)]


def test_the_url_opens_the_runs_pages_with_the_view():
    url = study_view_url("http://127.0.0.1:5000/", "7", view_key("size,data@x"))
    assert url == (
        "http://127.0.0.1:5000/#/experiments/7/runs?workflowType=machine_learning"
        "&viewStateShareKey=audioscale-size_data_x"
    )
    charts = study_view_url("http://127.0.0.1:5000/", "7", view_key("size,data@x"), charts=True)
    assert charts == url + "&compareRunsMode=CHART"
    # A run's page and an artifact of it, in the model-training layout too.
    assert (
        run_page_url("http://h:5000", "7", "abc")
        == "http://h:5000/#/experiments/7/runs/abc?workflowType=machine_learning"
    )
    assert run_page_url("http://h:5000", "7", "abc", "laws/report.html") == (
        "http://h:5000/#/experiments/7/runs/abc/artifacts/laws/report.html?workflowType=machine_learning"
    )
