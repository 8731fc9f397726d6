"""Every input of a study checked before the first trial: tasks, corpus, shards, resources, MLflow.

A mistyped --tasks directory used to be found only at each trial's evaluation, after all of the
pretraining compute was spent, and the study was then marked FINISHED with no trial scored. These
checks read only names, small metadata files and the cluster size; each failure is a ValueError
naming the flag and what to do, raised before the study run is opened or Ray started.
"""

from __future__ import annotations

from pathlib import Path

from pipeline.corpus.tasks.build import TASK_BUILDERS
from pipeline.storage.bucket_check import check_bucket
from pipeline.storage.uri import is_uri
from pipeline.storage.writable import check_writable_dir
from pipeline.task_format.reader import check_task_files, list_task_dirs, read_task_info
from pipeline.tracking import runs as tracking
from sweeps.protocol.task_set import TaskSetCheck, check_task_set
from sweeps.study.config import StudyConfig


def check_study_inputs(config: StudyConfig) -> TaskSetCheck:
    """Raise on the first bad input; the task folder against the profile's task set."""
    if config.tasks_dir is not None:
        _check_tasks(Path(config.tasks_dir))
        present, where = [path.name for path in list_task_dirs(Path(config.tasks_dir))], f"--tasks {config.tasks_dir}"
    else:
        present, where = list(TASK_BUILDERS), "the embedded default tasks"
    task_set = check_task_set(config.profile, present, accept_difference=config.evaluate.accept_task_set, where=where)
    if config.corpus_dir is not None:
        corpus = Path(config.corpus_dir)
        if not corpus.is_dir() or not any(path.is_file() for path in corpus.rglob("*")):
            raise ValueError(
                f"--corpus {corpus}: no audio files there; pass a directory of audio (or leave --corpus "
                "out for the embedded corpus)"
            )
    for flag, place in (("--storage-path", config.storage_path), ("--shards", config.shards_root)):
        if place is None:
            continue
        if is_uri(place):  # a wrong key, a missing bucket, a store that is down: one line, now
            check_bucket(place, what=flag, write=flag == "--storage-path")
        else:
            check_writable_dir(place, what=flag)  # a file there, read-only or full: one line, now
    if config.address is None and config.gpus_per_trial > 0:
        _check_local_gpus(config.gpus_per_trial)
    tracking.check_store(tracking.resolve_tracking_uri(config.tracking_uri))  # as given, when called alone
    return task_set


def _check_tasks(tasks_dir: Path) -> None:
    try:
        for task_dir in list_task_dirs(tasks_dir):
            check_task_files(read_task_info(task_dir))
    except ValueError as error:
        raise ValueError(f"--tasks {tasks_dir}: {error}") from error


def _check_local_gpus(gpus_per_trial: float) -> None:
    import torch  # only when GPUs are asked for

    available = torch.cuda.device_count()
    if available < gpus_per_trial:
        raise ValueError(
            f"--gpus-per-trial {gpus_per_trial:g} but this machine has {available} GPU(s); "
            "use --gpus-per-trial 0 or --address of a cluster with GPUs"
        )
