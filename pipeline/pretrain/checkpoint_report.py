"""A pretraining checkpoint handed to Ray Train: written locally by rank 0, copied to storage by Ray.

With --checkpoint-upload async (`ray.train.CheckpointUploadMode.ASYNC`, Ray Train 2.60) Ray copies
the folder in a thread while training goes on, so the step with a checkpoint stalls only for the
local write (benchmarks/bench_checkpoint_stall.py); sync copies it inside `ray.train.report`.
"""

from __future__ import annotations

import shutil
import tempfile
from typing import Any

import ray.train

from pipeline.pretrain.config import ResolvedPretrainConfig
from pipeline.pretrain.training_core import TrainingState, save_training_state


def report_with_checkpoint(
    metrics: dict[str, Any],
    training: TrainingState,
    *,
    config: ResolvedPretrainConfig,
    step: int,
    rank: int,
    data_position: dict[str, int],
    extra_meta: dict[str, Any] | None = None,
) -> None:
    """Rank 0 writes the checkpoint directory; every rank reports (Ray Train's barrier).

    The folder is written locally, then Ray copies it to storage: with --checkpoint-upload async in
    a thread while training goes on (ray.train.CheckpointUploadMode.ASYNC), so it must outlive this
    call; Ray deletes it once copied (delete_local_checkpoint_after_upload). A copy cut short (a
    node dies, the store goes away) leaves a folder that fails `verify_checkpoint` (model.json holds
    every file's sha256), so a resume never picks one; Ray may register it all the same, because
    pyarrow ignores an error raised when it closes an upload stream, so the driver checks what
    storage holds after the run (`pipeline.pretrain.stored_checkpoints`).
    """
    if rank != 0:
        ray.train.report(metrics)
        return
    directory = tempfile.mkdtemp(prefix="audioscale-ckpt-")
    try:
        save_training_state(
            directory, training, config=config, step=step, data_position=data_position, extra_meta=extra_meta
        )
        ray.train.report(
            metrics,
            checkpoint=ray.train.Checkpoint.from_directory(directory),
            checkpoint_dir_name=f"checkpoint_step_{step:08d}",
            checkpoint_upload_mode=ray.train.CheckpointUploadMode[config.checkpoint.checkpoint_upload.upper()],
            delete_local_checkpoint_after_upload=True,
        )
    except BaseException:
        shutil.rmtree(directory, ignore_errors=True)  # an async upload has not started: nothing else reads it
        raise
