"""MLflow at the edge: the only module that imports mlflow.

Conventions:
- Tracking URIs are always absolute: Ray workers run in other working directories, and MLflow's
  default (`sqlite:///mlflow.db`, artifacts in `./mlruns`) is relative to the current one.
- A SQLite store keeps its artifacts beside the database, in `<db dir>/mlartifacts`.
- A run is found again by its name inside its experiment, so re-running a pretraining with the same
  run name appends to the same MLflow run.
- Only rank 0 / the driver writes (SQLite and many concurrent writers do not mix); callers decide.
"""

from __future__ import annotations

import contextlib
import os
import socket
import sys
import tempfile
import time
import urllib.parse
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import mlflow
from mlflow.entities import Metric, Param, RunTag
from mlflow.exceptions import MlflowException

from pipeline.storage.writable import check_local_store
from pipeline.tracking.keys import RESUMED_PARAM_PREFIX
from pipeline.tracking.lifecycle import OWNER_TAG, RunInUseError, owner_alive, this_owner
from pipeline.tracking.param_text import as_typed, param_text
from pipeline.tracking.setup import CODE_VERSION_ENV as CODE_VERSION_ENV
from pipeline.tracking.setup import code_version as code_version
from pipeline.tracking.setup import resolve_tracking_uri as resolve_tracking_uri
from pipeline.tracking.setup import uri_source
from pipeline.tracking.store_lock import sqlite_path, store_lock

# MLflow 3 opens an experiment on its GenAI traces page unless told it holds model training: the UI
# reads this experiment tag (values in its bundle: "genai_development", "custom_model_development",
# the latter shown as "Model training"). Every experiment this project creates trains models.
EXPERIMENT_KIND_TAG = "mlflow.experimentKind"
EXPERIMENT_KIND = "custom_model_development"
RUN_DESCRIPTION_TAG = "mlflow.note.content"  # a run's description in the UI, rendered as markdown


_READY_STORES: set[str] = set()  # SQLite stores whose tables this process has seen made


def ready_store(uri: str) -> None:
    """Open a SQLite store once per process under its lock (pipeline.tracking.store_lock), so its
    tables are created exactly once however many processes start together."""
    if uri in _READY_STORES or sqlite_path(uri) is None:
        return
    with store_lock(uri):
        mlflow.MlflowClient(uri).search_experiments(max_results=1)
    _READY_STORES.add(uri)


# The up-front check asks a server once, quickly: MLflow's client would otherwise retry a dead or
# failing server with backoff for minutes (7 retries, 120 s timeout each, by default) before the
# command says anything.
CHECK_TIMEOUT_S = 5
_QUICK_REQUEST_ENV = {"MLFLOW_HTTP_REQUEST_MAX_RETRIES": "0", "MLFLOW_HTTP_REQUEST_TIMEOUT": str(CHECK_TIMEOUT_S)}


class RunNotFoundError(LookupError):
    """No run with this id in the store."""


def check_store(uri: str, *, flag: str = "--tracking-uri") -> None:
    """Raise ValueError naming the URI unless the MLflow store answers (a server: within 5 s).

    A local store must be writable first: MLflow retries a read-only SQLite file for ~2 minutes
    and then ends in a long SQLAlchemy traceback."""
    check_local_store(uri)
    ready_store(uri)
    parsed = urllib.parse.urlparse(uri)
    try:
        if parsed.scheme in ("http", "https"):  # MLflow's client retries a dead server for minutes
            port = parsed.port or (443 if parsed.scheme == "https" else 80)
            socket.create_connection((parsed.hostname, port), timeout=CHECK_TIMEOUT_S).close()
        with _quick_requests():
            mlflow.MlflowClient(uri).search_experiments(max_results=1)
    except Exception as error:  # noqa: BLE001 - any failure to open the store is the same user error
        raise ValueError(
            f"{flag} {uri}: the MLflow store cannot be opened ({type(error).__name__}: "
            f"{' '.join(str(error).split())[:200]}); check the URI or start the server"
        ) from error


def checked_store(uri: str | None) -> str:
    """The absolute form of `uri` (`resolve_tracking_uri`) once its store answers. Every command that
    logs to MLflow calls this before its expensive work, so that a tracking server that is not there
    is one line within seconds, not minutes of silence after the work is done."""
    resolved = resolve_tracking_uri(uri)
    check_store(resolved, flag=uri_source(uri))
    return resolved


@contextlib.contextmanager
def _quick_requests():
    """MLflow reads its HTTP retry settings from the environment at each request."""
    saved = {key: os.environ.get(key) for key in _QUICK_REQUEST_ENV}
    os.environ.update(_QUICK_REQUEST_ENV)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def _artifact_location(tracking_uri: str) -> str | None:
    if tracking_uri.startswith("sqlite:///"):
        return (Path(tracking_uri[len("sqlite:///") :]).parent / "mlartifacts").as_uri()
    return None  # a tracking server decides where artifacts go


def set_experiment_tag(tracking_uri: str, experiment_id: str, key: str, value: str) -> None:
    mlflow.MlflowClient(tracking_uri).set_experiment_tag(experiment_id, key, value)


def get_or_create_experiment(tracking_uri: str, experiment_name: str) -> str:
    """The id of `experiment_name`, created (with an absolute artifact location) when missing, and
    tagged as a model-training experiment (one made before that tag existed is tagged now)."""
    client = mlflow.MlflowClient(tracking_uri)
    experiment = client.get_experiment_by_name(experiment_name)
    if experiment is not None:
        if EXPERIMENT_KIND_TAG not in experiment.tags:
            client.set_experiment_tag(experiment.experiment_id, EXPERIMENT_KIND_TAG, EXPERIMENT_KIND)
        return experiment.experiment_id
    try:
        return client.create_experiment(
            experiment_name,
            artifact_location=_artifact_location(tracking_uri),
            tags={EXPERIMENT_KIND_TAG: EXPERIMENT_KIND},
        )
    except MlflowException:
        # Another process created it between our lookup and create.
        experiment = client.get_experiment_by_name(experiment_name)
        if experiment is None:
            raise
        return experiment.experiment_id


def find_run_id(tracking_uri: str, experiment_name: str, run_name: str) -> str | None:
    """The newest run called `run_name` in `experiment_name`, or None."""
    client = mlflow.MlflowClient(tracking_uri)
    experiment = client.get_experiment_by_name(experiment_name)
    if experiment is None:
        return None
    runs = client.search_runs(
        [experiment.experiment_id],
        filter_string=f"attributes.run_name = '{run_name}'",
        order_by=["attributes.start_time DESC"],
        max_results=1,
    )
    return runs[0].info.run_id if runs else None


@dataclass(frozen=True, kw_only=True)
class TrackedRun:
    """A handle on one MLflow run that any process can log through (no global active run)."""

    tracking_uri: str
    run_id: str

    @property
    def _client(self) -> mlflow.MlflowClient:
        return mlflow.MlflowClient(self.tracking_uri)

    def log_params(self, params: dict[str, Any]) -> None:
        """Log parameters; on a resumed run, a value that changed (e.g. more steps) is kept as
        the tag `resumed_param.<key>` because MLflow parameters cannot be overwritten."""
        logged = self._client.get_run(self.run_id).data.params
        new, changed = [], []
        for key, value in params.items():
            text = param_text(value)
            if key not in logged:
                new.append(Param(key, text))
            elif logged[key] != text:
                changed.append(RunTag(f"{RESUMED_PARAM_PREFIX}{key}", text))
        self._client.log_batch(self.run_id, params=new, tags=changed)

    def log_metrics(self, metrics: dict[str, float], *, step: int) -> None:
        timestamp_ms = int(time.time() * 1000)
        # As typed (12 significant digits): the UI prints a float's binary tail (an lr of 3e-05 read
        # 0.000029999999999999997); no measurement here has 12 digits that mean something.
        batch = [Metric(k, as_typed(float(v)), timestamp_ms, int(step)) for k, v in metrics.items() if v is not None]
        self._client.log_batch(self.run_id, metrics=batch)

    def logged_steps(self, key: str) -> set[int]:
        """Every step `key` was logged at."""
        return {metric.step for metric in self._client.get_metric_history(self.run_id, key)}

    def last_step(self, key: str) -> int:
        """The highest step `key` was logged at (-1: never)."""
        return max(self.logged_steps(key), default=-1)

    def set_tags(self, tags: dict[str, Any]) -> None:
        self._client.log_batch(self.run_id, tags=[RunTag(k, param_text(v)) for k, v in tags.items()])

    def tags(self) -> dict[str, str]:
        return dict(self._client.get_run(self.run_id).data.tags)

    def delete_tag(self, key: str) -> None:
        if key in self.tags():
            self._client.delete_tag(self.run_id, key)

    def log_artifact(self, local_path: str | Path, *, artifact_path: str | None = None) -> None:
        self._client.log_artifact(self.run_id, str(local_path), artifact_path=artifact_path)

    def log_dict(self, data: dict[str, Any], artifact_file: str) -> None:
        self._client.log_dict(self.run_id, data, artifact_file)

    def finish(self, status: str = "FINISHED") -> None:
        """Mark the run FINISHED / FAILED / KILLED."""
        self._client.set_terminated(self.run_id, status=status)

    def finish_after(self, seconds: float) -> None:
        """Mark the run FINISHED `seconds` after its start: for work done before its run was written
        (a baseline measured first), the UI's Duration is then the work's, not the logging's."""
        start_ms = self._client.get_run(self.run_id).info.start_time
        self._client.set_terminated(self.run_id, status="FINISHED", end_time=int(start_ms + 1000 * seconds))

    def artifact_uri(self) -> str:
        return self._client.get_run(self.run_id).info.artifact_uri


def _running_owner(tracking_uri: str, run_id: str) -> str | None:
    """The owner tag of a run RUNNING in another process (alive or not), else None."""
    run = mlflow.MlflowClient(tracking_uri).get_run(run_id)
    owner = run.data.tags.get(OWNER_TAG, "unknown process")
    return owner if run.info.status == "RUNNING" and owner != this_owner() else None


def stale_owner(tracking_uri: str, run_id: str) -> str | None:
    """The owner of a run left RUNNING by a process that is gone (killed, crashed), else None."""
    owner = _running_owner(tracking_uri, run_id)
    return owner if owner is not None and not owner_alive(owner) else None


def live_owner(tracking_uri: str, run_id: str) -> str | None:
    """The owner of a run RUNNING in another live process on this machine, else None."""
    owner = _running_owner(tracking_uri, run_id)
    return owner if owner is not None and owner_alive(owner) else None


def _claim(client: mlflow.MlflowClient, run_id: str, run_name: str) -> None:
    """Refuse a run another live process is writing; take over one left RUNNING, saying so."""
    run = client.get_run(run_id)
    owner = run.data.tags.get(OWNER_TAG)
    if run.info.status == "RUNNING" and owner and owner != this_owner():
        if owner_alive(owner):
            raise RunInUseError(
                f"run {run_name!r} is RUNNING in process {owner}; wait for it, stop it, or use another name"
            )
        print(f"note: run {run_name!r} was left RUNNING by {owner}, which is gone; taking it over", file=sys.stderr)
    client.set_tag(run_id, OWNER_TAG, this_owner())


def start_or_resume_run(
    *,
    tracking_uri: str | None,
    experiment_name: str,
    run_name: str,
    tags: dict[str, Any] | None = None,
    parent_run_id: str | None = None,
    start_time_ms: int | None = None,
) -> TrackedRun:
    """The run named `run_name` in `experiment_name` (created when missing, at `start_time_ms` when
    given: work that ran before its run was written), set back to RUNNING."""
    uri = resolve_tracking_uri(tracking_uri)
    ready_store(uri)  # before any client: one may open the store (and make its tables) on creation
    client = mlflow.MlflowClient(uri)
    with store_lock(uri):  # two processes starting one name together: one creates, one finds it
        run_id = find_run_id(uri, experiment_name, run_name)
        if run_id is None:
            experiment_id = get_or_create_experiment(uri, experiment_name)
            all_tags = {"audioscale.code_version": code_version(), OWNER_TAG: this_owner(), **(tags or {})}
            if parent_run_id:
                all_tags["mlflow.parentRunId"] = parent_run_id
            run_id = client.create_run(
                experiment_id, start_time=start_time_ms, run_name=run_name, tags=all_tags
            ).info.run_id
            return TrackedRun(tracking_uri=uri, run_id=run_id)
        _claim(client, run_id, run_name)  # under the lock: two takers of one dead run, one wins
    client.update_run(run_id, status="RUNNING")
    if tags:
        TrackedRun(tracking_uri=uri, run_id=run_id).set_tags(tags)
    return TrackedRun(tracking_uri=uri, run_id=run_id)


def attach_run(tracking_uri: str, run_id: str) -> TrackedRun:
    """A handle on an existing run, e.g. inside a Ray worker that was given the run id."""
    return TrackedRun(tracking_uri=resolve_tracking_uri(tracking_uri), run_id=run_id)


def read_run(tracking_uri: str, run_id: str) -> dict[str, Any]:
    """Params, tags, status, artifact URI and full metric histories [(step, value)] of a run."""
    client = mlflow.MlflowClient(resolve_tracking_uri(tracking_uri))
    try:
        run = client.get_run(run_id)
    except MlflowException as error:
        if error.error_code == "RESOURCE_DOES_NOT_EXIST":
            raise RunNotFoundError(f"no run {run_id} in the MLflow store {tracking_uri}") from None
        raise
    history = {
        key: [
            (m.step, m.value)
            for m in sorted(client.get_metric_history(run_id, key), key=lambda m: (m.step, m.timestamp))
        ]
        for key in run.data.metrics
    }
    return {
        "run_id": run_id,
        "run_name": run.info.run_name,
        "status": run.info.status,
        "params": dict(run.data.params),
        "tags": dict(run.data.tags),
        "metrics": history,
        "artifact_uri": run.info.artifact_uri,
    }


def list_artifacts(tracking_uri: str, run_id: str, path: str | None = None) -> list[str]:
    client = mlflow.MlflowClient(resolve_tracking_uri(tracking_uri))
    return [a.path for a in client.list_artifacts(run_id, path)]


def download_artifacts(tracking_uri: str, run_id: str, artifact_path: str, destination: str | Path) -> Path:
    """Copy a run's artifact (file or folder) into `destination` from wherever the store keeps it (a
    tracking server's proxy included: no shared filesystem needed); returns the local path."""
    client = mlflow.MlflowClient(resolve_tracking_uri(tracking_uri))
    return Path(client.download_artifacts(run_id, artifact_path, str(destination)))


def experiment_tags(tracking_uri: str, experiment_name: str) -> dict[str, str]:
    experiment = mlflow.MlflowClient(resolve_tracking_uri(tracking_uri)).get_experiment_by_name(experiment_name)
    return dict(experiment.tags) if experiment is not None else {}


def experiment_name_of_run(tracking_uri: str, run_id: str) -> str:
    """The name of the experiment a run belongs to (added by the evaluate stream)."""
    client = mlflow.MlflowClient(resolve_tracking_uri(tracking_uri))
    return client.get_experiment(client.get_run(run_id).info.experiment_id).name


# --- Studies (stream laws): a study is a parent run; each trial is a child run. ---


def list_child_runs(tracking_uri: str, parent_run_id: str) -> list[dict[str, Any]]:
    """`read_run` of every run whose parent is `parent_run_id`, oldest first."""
    uri = resolve_tracking_uri(tracking_uri)
    client = mlflow.MlflowClient(uri)
    parent = client.get_run(parent_run_id)
    children = client.search_runs(
        [parent.info.experiment_id],
        filter_string=f"tags.mlflow.parentRunId = '{parent_run_id}'",
        order_by=["attributes.start_time ASC"],
        max_results=50_000,
    )
    return [read_run(uri, child.info.run_id) for child in children]


def log_bytes(run: TrackedRun, data: bytes, artifact_file: str) -> None:
    """`data` as the artifact `artifact_file` of `run` (a figure's PNG or PDF, already rendered)."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / Path(artifact_file).name
        path.write_bytes(data)
        parent = str(Path(artifact_file).parent)
        run.log_artifact(path, artifact_path=None if parent == "." else parent)


def artifact_download_path(run: TrackedRun, artifact_file: str) -> str:
    """The MLflow server's route for one artifact, relative to the UI root (where its pages load)."""
    return "get-artifact?" + urlencode({"path": artifact_file, "run_uuid": run.run_id})


def log_text(run: TrackedRun, text: str, artifact_file: str) -> None:
    mlflow.MlflowClient(run.tracking_uri).log_text(run.run_id, text, artifact_file)
