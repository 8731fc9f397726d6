"""Task clips as model input (normalised log-mel in whole patches), computed once per process.

A study trial evaluates several checkpoints of one model (initialisation, Table III's steps, the
end), and every trial of a study the same tasks: each reads the same clips through the same front
end and normalisation, so the audio decode and the log-mel, most of a small model's evaluation
time, are done once. The key is the task split plus everything the input depends on
(`FrameEmbedder.input_key`); a changed task directory (its split file's size and mtime) is read
again. In memory, bounded in bytes (the oldest entries go first; a split of the default tasks is
~15-110 MB as float32); on disk under `$AUDIOSCALE_INPUT_CACHE_DIR` when set (a study sets it to
its home's cache folder, or a temporary one for tasks outside the home: `shared_cache_dir`, so its
trials, each a new process, share the work).
"""

from __future__ import annotations

import hashlib
import os
import sys
import tempfile
from collections import OrderedDict
from pathlib import Path

import numpy as np

from pipeline.evaluate.embeddings import FrameEmbedder
from pipeline.storage.paths import audioscale_home
from pipeline.task_format.reader import TaskInfo, read_task_audio

# Enough for the 7 default tasks (~0.7 GB) with room; $AUDIOSCALE_INPUT_CACHE_MB overrides (0: off).
DEFAULT_CACHE_MB = 2048

_CACHE: OrderedDict[tuple, list[np.ndarray]] = OrderedDict()


def cache_limit_bytes() -> int:
    return int(float(os.environ.get("AUDIOSCALE_INPUT_CACHE_MB", DEFAULT_CACHE_MB)) * 2**20)


def _split_stamp(task: TaskInfo, split: str) -> tuple:
    labels = Path(task.directory) / f"{split}.json"
    stat = labels.stat() if labels.exists() else None
    return (str(Path(task.directory).resolve()), split, stat.st_size if stat else -1, stat.st_mtime_ns if stat else -1)


def _size(inputs: list[np.ndarray]) -> int:
    return sum(array.nbytes for array in inputs)


def model_inputs(task: TaskInfo, split: str, file_names: list[str], embedder: FrameEmbedder) -> list[np.ndarray]:
    """Each clip's model input, in `file_names` order: from the cache, or read, kept and returned."""
    key = (*_split_stamp(task, split), tuple(file_names), embedder.input_key)
    if key in _CACHE:
        _CACHE.move_to_end(key)
        return _CACHE[key]
    inputs = _read_from_disk(key)
    if inputs is None:
        inputs = [embedder.model_input(read_task_audio(task, split, name)) for name in file_names]
        _write_to_disk(key, inputs)
    limit = cache_limit_bytes()
    if _size(inputs) <= limit:
        _CACHE[key] = inputs
        while sum(_size(v) for v in _CACHE.values()) > limit:
            _CACHE.popitem(last=False)
    return inputs


def shared_cache_dir(tasks_dir: str | Path) -> Path:
    """Where a study's trials share their task inputs on disk: the home's cache folder for the embedded
    default tasks (kept between studies), the system's temporary folder for tasks given elsewhere, so a
    study given every location writes nothing under `$AUDIOSCALE_HOME`."""
    tasks = Path(tasks_dir).expanduser().absolute()
    if tasks.is_relative_to(audioscale_home()):
        return audioscale_home() / "cache" / "task_inputs"
    return Path(tempfile.gettempdir()) / f"audioscale-task-inputs-{os.getuid()}"


_UNWRITABLE: set[Path] = set()  # cache folders a write failed in (said once per process)


def _disk_path(key: tuple) -> Path | None:
    folder = os.environ.get("AUDIOSCALE_INPUT_CACHE_DIR")
    return Path(folder) / f"{hashlib.sha256(repr(key).encode()).hexdigest()[:32]}.npz" if folder else None


def _read_from_disk(key: tuple) -> list[np.ndarray] | None:
    path = _disk_path(key)
    if path is None or not path.is_file():
        return None
    try:
        with np.load(path) as stored:
            frames, lengths = stored["frames"], stored["lengths"]
    except (OSError, ValueError, KeyError):  # a partial or foreign file: rebuild it
        return None
    return np.split(frames, np.cumsum(lengths)[:-1])


def _write_to_disk(key: tuple, inputs: list[np.ndarray]) -> None:
    """Written to a temporary name, then renamed: concurrent trials never read half a file."""
    path = _disk_path(key)
    if path is None or not inputs:
        return
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path.parent, suffix=".tmp", delete=False) as handle:
            np.savez(handle, frames=np.concatenate(inputs), lengths=np.array([len(x) for x in inputs]))
        os.replace(handle.name, path)
    except OSError as error:  # a read-only or full home: the cache only saves time, the scores stay the same
        if path.parent not in _UNWRITABLE:
            _UNWRITABLE.add(path.parent)
            print(
                f"note: task inputs are not cached on disk ({path.parent}: {error.strerror or error}); "
                "each process decodes them again",
                file=sys.stderr,
                flush=True,
            )


def clear() -> None:
    _CACHE.clear()
