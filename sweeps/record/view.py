"""The study's page in the MLflow UI: its trials as a table with Q, R, the grid axis and status.

MLflow 3.17's UI opens an experiment on its GenAI pages (traces, cost) and shows only attribute
columns (created, dataset, duration, source, models) until a user picks others; both are per-browser
settings the server cannot change. What the server can hold is a shared view: an experiment tag
`mlflow.sharedViewState.<key>` whose JSON value is the runs page's state (its columns, filter and
sort), opened by `?viewStateShareKey=<key>`; `workflowType=machine_learning` picks the runs pages
over the GenAI ones. Both names come from the UI bundle of mlflow 3.17.2 (checked in a browser:
docs/studies.md). Each study writes its own view; the URL the study prints opens it.
"""

from __future__ import annotations

import json
import re
from urllib.parse import urlencode

from pipeline.tracking import runs as tracking
from sweeps.record.keys import (
    BASELINE_METRIC_PREFIX,
    BEST_TRIAL_TAG,
    GRID_PARAM_PREFIX,
    Q_CI_HIGH,
    Q_CI_LOW,
    Q_METRIC,
    RANKME_METRIC,
    STATUS_TAG,
)

SHARED_VIEW_TAG_PREFIX = "mlflow.sharedViewState."  # the UI reads the view from this experiment tag
VIEW_KEY_PARAM = "viewStateShareKey"
WORKFLOW_PARAM, MODEL_TRAINING = "workflowType", "machine_learning"
COMPARE_MODE_PARAM = "compareRunsMode"  # TABLE (the default) or CHART: which half of the runs page opens
CHART_SECTION_ID, CHART_SECTION_NAME = "audioscale-study-charts", "Study"


def view_key(study_name: str) -> str:
    """A key safe in a tag name and a URL: the study's name with anything else replaced."""
    return "audioscale-" + re.sub(r"[^A-Za-z0-9_.-]", "_", study_name)


def _column(kind: str, key: str) -> str:
    return f"{kind}.`{key}`"  # the UI's column id: attribute kind, then the key in backticks


def _chart(uuid: str, kind: str, title: str, **fields) -> dict:
    """One card of the UI's chart view, as its bundle serialises one (the fields its LINE and SCATTER
    card classes set; the rest keep the UI's defaults)."""
    return {"uuid": uuid, "type": kind, "displayName": title, "metricSectionId": CHART_SECTION_ID,
            "isGenerated": False, "deleted": False, **fields}  # fmt: skip


def study_charts() -> tuple[list[dict], list[dict]]:
    """The chart view's cards and sections: Q over steps, one line per trial, and Q against RankMe
    at each run's last step, in a section of their own above the UI's generated ones."""
    q_over_steps = _chart(
        "audioscale-q-over-steps", "LINE", "Q over steps, per trial", metricKey=Q_METRIC,
        selectedMetricKeys=[Q_METRIC], xAxisKey="step", scaleType="linear", xAxisScaleType="linear",
        lineSmoothness=0, displayPoints=True, runsCountToCompare=100, useGlobalXaxisKey=False,
    )  # fmt: skip
    q_against_rankme = _chart(
        "audioscale-q-against-rankme", "SCATTER", "Q against RankMe (each trial's last step)",
        xaxis={"key": RANKME_METRIC, "type": "METRIC"}, yaxis={"key": Q_METRIC, "type": "METRIC"},
        runsCountToCompare=100,
    )  # fmt: skip
    section = {"uuid": CHART_SECTION_ID, "name": CHART_SECTION_NAME, "display": True, "isReordered": False,
               "deleted": False, "isGenerated": False}  # fmt: skip
    return [q_over_steps, q_against_rankme], [section]


def study_view_state(study_run_id: str, grid_names: list[str]) -> dict:
    """The runs page showing only this study's children (trials and baselines, told apart by their
    own metric names: sweeps.record.keys), sorted along its first grid axis, with Q's interval, the
    best trial's mark and the study's charts."""
    grid_columns = [_column("params", f"{GRID_PARAM_PREFIX}{name}") for name in grid_names]
    charts, sections = study_charts()
    return {
        "selectedColumns": [
            _column("metrics", Q_METRIC),
            _column("metrics", Q_CI_LOW),
            _column("metrics", Q_CI_HIGH),
            _column("metrics", RANKME_METRIC),
            *grid_columns,
            _column("tags", BEST_TRIAL_TAG),
            _column("tags", STATUS_TAG),
            _column("metrics", f"{BASELINE_METRIC_PREFIX}{Q_METRIC}"),
        ],  # fmt: skip
        "searchFilter": f"tags.mlflow.parentRunId = '{study_run_id}'",
        "orderByKey": grid_columns[0] if grid_columns else "attributes.start_time",
        "orderByAsc": True,
        "compareRunCharts": charts,
        "compareRunSections": sections,
        "isAccordionReordered": True,  # the study's section stays first, as written
    }


def write_study_view(tracking_uri: str, experiment_id: str, *, study_name: str, study_run_id: str,
                     grid_names: list[str]) -> str:  # fmt: skip
    """Store the study's view on its experiment; returns its key."""
    key = view_key(study_name)
    state = study_view_state(study_run_id, grid_names)
    tracking.set_experiment_tag(tracking_uri, experiment_id, SHARED_VIEW_TAG_PREFIX + key, json.dumps(state))
    return key


def study_view_url(ui_root: str, experiment_id: str, key: str, *, charts: bool = False) -> str:
    """The URL of the study's runs table (or, with `charts`, its chart view) in a UI served at
    `ui_root` (e.g. http://127.0.0.1:5000)."""
    query = {WORKFLOW_PARAM: MODEL_TRAINING, VIEW_KEY_PARAM: key, **({COMPARE_MODE_PARAM: "CHART"} if charts else {})}
    return f"{ui_root.rstrip('/')}/#/experiments/{experiment_id}/runs?{urlencode(query)}"


def run_page_url(ui_root: str, experiment_id: str, run_id: str, artifact: str | None = None) -> str:
    """A run's page (or one of its artifacts in the artifact viewer) in the model-training layout."""
    page = f"{ui_root.rstrip('/')}/#/experiments/{experiment_id}/runs/{run_id}"
    if artifact:
        page += f"/artifacts/{artifact}"
    return f"{page}?{urlencode({WORKFLOW_PARAM: MODEL_TRAINING})}"
