"""How MLflow runs are addressed and stamped, without importing MLflow: absolute tracking URIs and
the code version every run records (pipeline.tracking.runs re-exports both)."""

from __future__ import annotations

import functools
import os
import subprocess
from pathlib import Path

from pipeline import paths

CODE_VERSION_ENV = "AUDIOSCALE_CODE_VERSION"


def resolve_tracking_uri(uri: str | None = None) -> str:
    """An absolute tracking URI.

    None -> `$MLFLOW_TRACKING_URI`, else `pipeline.paths.default_tracking_uri()`. A relative
    `sqlite:///x.db` or a bare file path (`runs/mlflow.db`, or a directory that then holds
    `mlflow.db`) becomes an absolute SQLite URI. Server URIs (http, https, databricks) pass through.
    """
    uri = uri or os.environ.get("MLFLOW_TRACKING_URI") or paths.default_tracking_uri()
    if uri.startswith("sqlite:///"):
        db_path = Path(uri[len("sqlite:///") :])
    elif "://" not in uri and ":" not in uri.split("/")[0]:
        db_path = Path(uri)
        if db_path.suffix != ".db":
            db_path = db_path / "mlflow.db"
    else:
        return uri
    db_path = db_path.expanduser().resolve()
    db_path.parent.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{db_path}"


@functools.lru_cache(maxsize=1)
def code_version() -> str:
    """`$AUDIOSCALE_CODE_VERSION`, else the git commit of this checkout (`+dirty` with local
    changes), else the package version (e.g. inside a `ray job submit` working-dir copy)."""
    if os.environ.get(CODE_VERSION_ENV):
        return os.environ[CODE_VERSION_ENV]
    repo = Path(__file__).resolve().parents[2]
    try:
        sha = subprocess.run(
            ["git", "-C", str(repo), "rev-parse", "--short=12", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
            timeout=10,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(repo), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            check=True,
            timeout=10,
        ).stdout.strip()
        return f"git:{sha}{'+dirty' if dirty else ''}"
    except (OSError, subprocess.SubprocessError):
        from pipeline import __version__

        return f"audioscale=={__version__}"
