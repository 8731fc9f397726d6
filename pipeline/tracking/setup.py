"""How MLflow runs are addressed and stamped, without importing MLflow: absolute tracking URIs and
the code version every run records (pipeline.tracking.runs re-exports both)."""

from __future__ import annotations

import functools
import os
import subprocess
from pathlib import Path

from pipeline.cli.errors import UserError
from pipeline.storage import paths
from pipeline.storage.writable import nearest_existing

CODE_VERSION_ENV = "AUDIOSCALE_CODE_VERSION"


def resolve_tracking_uri(uri: str | None = None) -> str:
    """An absolute tracking URI.

    None -> `$MLFLOW_TRACKING_URI`, else `pipeline.storage.paths.default_tracking_uri()`. A relative
    `sqlite:///x.db` or a bare file path (`runs/mlflow.db`, or a directory that then holds
    `mlflow.db`) becomes an absolute SQLite URI. Server URIs (http, https, databricks) pass through.
    """
    source = uri_source(uri)
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
    _make_store_folder(db_path.parent, source=source, uri=uri)
    return f"sqlite:///{db_path}"


def uri_source(uri: str | None) -> str:
    """Where the tracking URI came from, as the user would name it in a message: the flag, the
    MLflow variable, or the default store under $AUDIOSCALE_HOME."""
    if uri:
        return "--tracking-uri"
    if os.environ.get("MLFLOW_TRACKING_URI"):
        return "$MLFLOW_TRACKING_URI"
    return "$AUDIOSCALE_HOME"


def _make_store_folder(folder: Path, *, source: str, uri: str) -> None:
    """Create the store's folder, or say in one line why not: under a file, `mkdir` raises
    FileExistsError or NotADirectoryError, which used to end the command in a traceback before
    any writable check could name the flag."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        blocker = nearest_existing(folder)
        why = f"{blocker} is a file, not a directory" if not blocker.is_dir() else (error.strerror or str(error))
        if source == "$AUDIOSCALE_HOME":
            raise UserError(
                f"$AUDIOSCALE_HOME {paths.audioscale_home()}: the default MLflow store {uri} cannot be made "
                f"({why}); set AUDIOSCALE_HOME to a folder, or pass --tracking-uri"
            ) from None
        raise UserError(
            f"{source} {uri}: cannot make the store's folder {folder} ({why}); choose another path"
        ) from None


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
