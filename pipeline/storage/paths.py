"""Where the embedded defaults live on disk.

Everything defaults to one absolute home directory so that Ray workers (which run in other
working directories) and `ray job submit --working-dir .` (which runs in a temporary copy of the
repo) all find the same corpus, shards and MLflow store.
"""

from __future__ import annotations

import os
from pathlib import Path

from pipeline.storage.uri import child_location


def audioscale_home() -> Path:
    """`$AUDIOSCALE_HOME`, or `~/audioscale` when unset; always absolute."""
    return Path(os.environ.get("AUDIOSCALE_HOME", Path.home() / "audioscale")).expanduser().resolve()


def default_corpus_dir() -> Path:
    return audioscale_home() / "corpus"


def default_tasks_dir() -> Path:
    return audioscale_home() / "tasks"


def default_shards_dir() -> Path:
    return audioscale_home() / "shards"


def shards_dir_for(*, preset_name: str, max_hours: float | None, root: str | Path | None = None) -> Path | str:
    """One shard directory per (preset, hour budget): nested subsets of the same corpus. Under a
    bucket URI root (`s3://BUCKET/shards?endpoint_override=...`), a URI with the root's options."""
    name = preset_name if max_hours is None else f"{preset_name}-h{max_hours:g}"
    return child_location(root or default_shards_dir(), name)


def default_ray_storage_dir() -> Path:
    return audioscale_home() / "ray_results"


def default_tracking_uri() -> str:
    """SQLite MLflow store under an absolute path (a relative sqlite URI breaks in Ray workers)."""
    return f"sqlite:///{audioscale_home() / 'mlflow.db'}"


def default_artifact_root() -> Path:
    return audioscale_home() / "mlartifacts"
