"""The study's MLflow view: a shared-view tag the UI opens by key, whose filter and sort are valid
MLflow search syntax that select exactly the study's children (checked on a real store; the browser
check is scripts/check_mlflow_view.py)."""

from __future__ import annotations

import json

import mlflow

from pipeline.tracking import runs as tracking
from sweeps.record.keys import STUDY_EXPERIMENT, child_run_name
from sweeps.record.view import SHARED_VIEW_TAG_PREFIX, study_view_url, view_key, write_study_view


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
        "metrics.`q`", "metrics.`rankme`", "params.`grid.mask_ratio`", "tags.`audioscale.trial_status`"
    ]  # fmt: skip
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
