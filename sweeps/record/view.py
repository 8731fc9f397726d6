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
from sweeps.record.keys import GRID_PARAM_PREFIX, STATUS_TAG

SHARED_VIEW_TAG_PREFIX = "mlflow.sharedViewState."  # the UI reads the view from this experiment tag
VIEW_KEY_PARAM = "viewStateShareKey"
WORKFLOW_PARAM, MODEL_TRAINING = "workflowType", "machine_learning"


def view_key(study_name: str) -> str:
    """A key safe in a tag name and a URL: the study's name with anything else replaced."""
    return "audioscale-" + re.sub(r"[^A-Za-z0-9_.-]", "_", study_name)


def _column(kind: str, key: str) -> str:
    return f"{kind}.`{key}`"  # the UI's column id: attribute kind, then the key in backticks


def study_view_state(study_run_id: str, grid_names: list[str]) -> dict:
    """The runs page showing only this study's children, sorted along its first grid axis."""
    grid_columns = [_column("params", f"{GRID_PARAM_PREFIX}{name}") for name in grid_names]
    return {
        "selectedColumns": [
            _column("metrics", "q"),
            _column("metrics", "rankme"),
            *grid_columns,
            _column("tags", STATUS_TAG),
        ],  # fmt: skip
        "searchFilter": f"tags.mlflow.parentRunId = '{study_run_id}'",
        "orderByKey": grid_columns[0] if grid_columns else "attributes.start_time",
        "orderByAsc": True,
    }


def write_study_view(tracking_uri: str, experiment_id: str, *, study_name: str, study_run_id: str,
                     grid_names: list[str]) -> str:  # fmt: skip
    """Store the study's view on its experiment; returns its key."""
    key = view_key(study_name)
    state = study_view_state(study_run_id, grid_names)
    tracking.set_experiment_tag(tracking_uri, experiment_id, SHARED_VIEW_TAG_PREFIX + key, json.dumps(state))
    return key


def study_view_url(ui_root: str, experiment_id: str, key: str) -> str:
    """The URL of the study's runs table in a UI served at `ui_root` (e.g. http://127.0.0.1:5000)."""
    query = urlencode({WORKFLOW_PARAM: MODEL_TRAINING, VIEW_KEY_PARAM: key})
    return f"{ui_root.rstrip('/')}/#/experiments/{experiment_id}/runs?{query}"
