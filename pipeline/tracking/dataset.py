"""The shards a run trained on, as an MLflow dataset input: the run's page says what data it saw.

The dataset is the shards directory (its source: the local path or the s3:// / gs:// URI) named by
its folder, and its digest is the shards' fingerprint from `manifest.json` (prep's sha256 over the
settings and every input), cut to the first DIGEST_CHARS characters because MLflow caps a dataset
digest at 36 (`mlflow.utils.validation.MAX_DATASET_DIGEST_SIZE`). The full fingerprint rides along
as an input tag (and the run's `shard_fingerprint` parameter).
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import mlflow
from mlflow.data.dataset_source_registry import resolve_dataset_source
from mlflow.data.meta_dataset import MetaDataset
from mlflow.entities import DatasetInput, InputTag

from pipeline.shards.location import is_uri
from pipeline.tracking.runs import TrackedRun

DIGEST_CHARS = 32  # 128 bits of the sha256, within MLflow's 36-character digest column
FINGERPRINT_TAG = "audioscale.shard_fingerprint"
CONTEXT_TAG = "mlflow.data.context"  # MLflow's tag for the role of a dataset input ("train", "eval")


def shards_dataset_digest(fingerprint: str) -> str:
    return fingerprint[:DIGEST_CHARS]


def log_shards_input(run: TrackedRun, *, shards_dir: str | Path, fingerprint: str, context: str = "train") -> None:
    """Record the shards as an input of `run` (logging the same shards again on a resume adds nothing)."""
    source_text = str(shards_dir) if is_uri(shards_dir) else str(Path(shards_dir).resolve())
    with warnings.catch_warnings():
        # A local path matches MLflow's "local artifact" source twice over; it warns and picks it.
        warnings.simplefilter("ignore", UserWarning)
        source = resolve_dataset_source(source_text)
    name = source_text.rstrip("/").rsplit("/", 1)[-1]
    dataset = MetaDataset(source, name=name, digest=shards_dataset_digest(fingerprint))
    tags = [InputTag(CONTEXT_TAG, context), InputTag(FINGERPRINT_TAG, fingerprint)]
    # `_to_mlflow_entity` is how MLflow's own `mlflow.log_input` turns a dataset into what the client logs;
    # the fluent call needs an active run, which this project does not keep.
    entity = dataset._to_mlflow_entity()
    mlflow.MlflowClient(run.tracking_uri).log_inputs(run.run_id, datasets=[DatasetInput(entity, tags=tags)])


def logged_datasets(tracking_uri: str, run_id: str) -> list[dict[str, Any]]:
    """Name, digest, source (as logged) and input tags of every dataset input of a run."""
    inputs = mlflow.MlflowClient(tracking_uri).get_run(run_id).inputs
    return [
        {
            "name": item.dataset.name,
            "digest": item.dataset.digest,
            "source_type": item.dataset.source_type,
            "source": json.loads(item.dataset.source),
            "tags": {tag.key: tag.value for tag in item.tags},
        }
        for item in (inputs.dataset_inputs if inputs else [])
    ]
