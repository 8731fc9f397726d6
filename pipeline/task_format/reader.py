"""Read HEAR scene-task directories (reference/evaluation.md).

Layout: `<task>/task_metadata.json`, `<task>/labelvocabulary.csv` (idx,label),
`<task>/<split>.json` ({file name: [labels]}), audio in `<task>/16000/<split>/<file>`.
A tasks directory may hold `tasks.json` (an index); otherwise every subdirectory with a
`task_metadata.json` is a task.
"""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import soundfile

HEAR_SAMPLE_RATE_HZ = 16_000
TRAIN_VALID_TEST = ("train", "valid", "test")
# `label_kind` in task_metadata.json (an audioscale addition to the HEAR format) says what the labels
# name. "language" marks language-ID tasks, which `python -m pipeline.evaluate --lid-head` probes with an
# attentive head on frame embeddings; the task builders write it (pipeline/tasks), and any other
# HEAR task directory can opt in by adding the field. Missing = unspecified.
LANGUAGE_LABEL_KIND = "language"


class TaskFormatError(ValueError):
    """A task directory does not follow the HEAR format; the message names the file."""


@dataclass(frozen=True, kw_only=True)
class TaskInfo:
    name: str
    directory: Path
    prediction_type: str  # "multiclass" | "multilabel"
    primary_metric: str
    split_mode: str
    splits: tuple[str, ...]
    labels: tuple[str, ...]  # index -> label, from labelvocabulary.csv
    label_kind: str = ""  # what the labels name ("language", ...), from task_metadata.json

    @property
    def multilabel(self) -> bool:
        return self.prediction_type == "multilabel"

    @property
    def is_language_id(self) -> bool:
        return self.label_kind == LANGUAGE_LABEL_KIND


@dataclass(frozen=True, kw_only=True)
class ProbeSplit:
    """Which split trains, which validates and which tests, for one fold."""

    train: tuple[str, ...]
    valid: str
    test: str


def _read_json(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        raise TaskFormatError(f"missing {path}; is this a HEAR task directory?") from None
    except json.JSONDecodeError as error:
        raise TaskFormatError(f"{path} is not valid JSON: {error}") from None


def read_task_info(task_dir: str | Path) -> TaskInfo:
    directory = Path(task_dir)
    metadata = _read_json(directory / "task_metadata.json")
    embedding_type = metadata.get("embedding_type", "scene")
    if embedding_type != "scene":
        raise TaskFormatError(f"{directory}: embedding_type {embedding_type!r} is not supported (scene tasks only)")
    prediction_type = metadata.get("prediction_type")
    if prediction_type not in ("multiclass", "multilabel"):
        raise TaskFormatError(f"{directory}/task_metadata.json: prediction_type must be multiclass or multilabel")
    metrics = metadata.get("evaluation") or []
    if not metrics:
        raise TaskFormatError(f"{directory}/task_metadata.json: 'evaluation' lists no metric (the first is primary)")
    rows = _read_vocabulary(directory / "labelvocabulary.csv")
    splits = metadata.get("splits") or []
    split_names = tuple(s["name"] if isinstance(s, dict) else str(s) for s in splits)
    return TaskInfo(
        name=str(metadata.get("task_name", directory.name)),
        directory=directory,
        prediction_type=prediction_type,
        primary_metric=str(metrics[0]),
        split_mode=str(metadata.get("split_mode", "trainvaltest")),
        splits=split_names or TRAIN_VALID_TEST,
        labels=tuple(label for _, label in rows),
        label_kind=str(metadata.get("label_kind") or ""),
    )


def _read_vocabulary(path: Path) -> list[tuple[int, str]]:
    """(idx, label) rows of labelvocabulary.csv, sorted by idx and checked to run 0..n-1."""
    if not path.exists():
        raise TaskFormatError(f"missing {path}")
    with path.open(newline="") as handle:
        reader = csv.DictReader(handle)
        header = reader.fieldnames or []
        if not {"idx", "label"} <= set(header):
            # A header that is not HEAR's (`idx;label` from a spreadsheet's export, a missing header row)
            # would surface as KeyError: 'idx', naming neither the file nor the fix.
            found = repr(",".join(header)) if header else "an empty file"
            raise TaskFormatError(
                f"{path}: expected HEAR's comma-separated header idx,label (then one idx,label row per class), "
                f"found {found}; rewrite the file with commas"
            )
        rows = []
        for row in reader:
            idx, label = (row["idx"] or "").strip(), row["label"]
            if not idx.isdigit() or label is None:
                raise TaskFormatError(
                    f"{path}: line {reader.line_num} is not idx,label with a whole-number idx; rewrite that line"
                )
            rows.append((int(idx), label))
    rows.sort()
    if [idx for idx, _ in rows] != list(range(len(rows))):
        raise TaskFormatError(f"{path}: idx must run 0..{len(rows) - 1} without gaps")
    return rows


def probe_splits(task: TaskInfo) -> list[ProbeSplit]:
    """trainvaltest: one fold. k-fold (fold00, fold01, ...): each fold tests once, the next one
    validates, the rest train (the HEAR convention)."""
    if set(TRAIN_VALID_TEST) <= set(task.splits):
        return [ProbeSplit(train=("train",), valid="valid", test="test")]
    folds = sorted(s for s in task.splits if s.startswith("fold"))
    if len(folds) < 3:
        raise TaskFormatError(f"{task.directory}: needs train/valid/test splits or at least 3 folds, got {task.splits}")
    return [
        ProbeSplit(
            train=tuple(f for f in folds if f not in (test, folds[(i + 1) % len(folds)])),
            valid=folds[(i + 1) % len(folds)],
            test=test,
        )
        for i, test in enumerate(folds)
    ]


def read_split_labels(task: TaskInfo, split: str) -> dict[str, list[str]]:
    """{file name: [labels]} of one split, checked against the label vocabulary."""
    labels = _read_json(task.directory / f"{split}.json")
    known = set(task.labels)
    for file_name, file_labels in labels.items():
        unknown = [label for label in file_labels if str(label) not in known]
        if unknown:
            raise TaskFormatError(
                f"{task.directory}/{split}.json: {file_name} has labels {unknown} not in labelvocabulary.csv"
            )
    return {name: [str(label) for label in file_labels] for name, file_labels in labels.items()}


def split_audio_path(task: TaskInfo, split: str, file_name: str) -> Path:
    return task.directory / str(HEAR_SAMPLE_RATE_HZ) / split / file_name


def read_task_audio(task: TaskInfo, split: str, file_name: str) -> np.ndarray:
    """A task clip as float32 mono at 16 kHz (HEAR tasks are stored at 16 kHz already)."""
    path = split_audio_path(task, split, file_name)
    try:
        wave, sample_rate_hz = soundfile.read(path, dtype="float32", always_2d=True)
    except (FileNotFoundError, RuntimeError, soundfile.LibsndfileError) as error:
        raise TaskFormatError(f"cannot read task audio {path}: {error}") from None
    if sample_rate_hz != HEAR_SAMPLE_RATE_HZ:
        raise TaskFormatError(f"{path} is {sample_rate_hz} Hz; HEAR task audio must be {HEAR_SAMPLE_RATE_HZ} Hz")
    return wave.mean(axis=1)


def encode_targets(task: TaskInfo, labels_per_file: list[list[str]]) -> np.ndarray:
    """Class indices (n,) int64 for multiclass, multi-hot (n, classes) float32 for multilabel."""
    index = {label: i for i, label in enumerate(task.labels)}
    if task.multilabel:
        targets = np.zeros((len(labels_per_file), len(task.labels)), dtype=np.float32)
        for row, file_labels in enumerate(labels_per_file):
            targets[row, [index[label] for label in file_labels]] = 1.0
        return targets
    for file_labels in labels_per_file:
        if len(file_labels) != 1:
            raise TaskFormatError(f"task {task.name} is multiclass but a file has labels {file_labels}")
    return np.array([index[file_labels[0]] for file_labels in labels_per_file], dtype=np.int64)


def check_task_files(task: TaskInfo) -> int:
    """Every split the probe needs has its label file, with known labels and audio for each clip
    listed, and no clip is empty; returns the number of clips. Reads labels, file names and audio
    headers only (~50 us a clip): a study's preflight runs it so a missing `test.json` is found
    before any training, not after it, and an evaluation runs it before the model is read out."""
    clips, empty = 0, []
    for split in sorted({name for fold in probe_splits(task) for name in (*fold.train, fold.valid, fold.test)}):
        labels = read_split_labels(task, split)
        if not labels:
            raise TaskFormatError(f"{task.directory}/{split}.json lists no clips; the probe needs every split")
        missing = [name for name in labels if not split_audio_path(task, split, name).is_file()]
        if missing:
            raise TaskFormatError(
                f"{task.directory}/{HEAR_SAMPLE_RATE_HZ}/{split}/ lacks {len(missing)} clip(s) that {split}.json "
                f"lists, e.g. {missing[0]}"
            )
        empty += [
            path for path in (split_audio_path(task, split, name) for name in sorted(labels)) if _frames(path) == 0
        ]
        clips += len(labels)
    _refuse_empty_clips(task, empty)
    return clips


# Named in full in an error line; the rest are counted.
EMPTY_CLIPS_NAMED = 3


def _refuse_empty_clips(task: TaskInfo, empty: list[Path]) -> None:
    """Clips with a header and 0 samples are refused, not scored and not skipped. They hold no sound:
    our front end would pad one to a window of silence and a HEAR module gets a (n, 0) tensor, so its
    label would be graded on each model's padding rather than on audio, and leaving it out would
    change the test set behind the user's back (Q compares only over the same clips). Such a file is
    damage (an interrupted write, a failed conversion): the task should be remade, or the clip taken
    out of its split file knowingly."""
    if not empty:
        return
    named = ", ".join(str(path) for path in empty[:EMPTY_CLIPS_NAMED])
    more = f" and {len(empty) - EMPTY_CLIPS_NAMED} more" if len(empty) > EMPTY_CLIPS_NAMED else ""
    raise TaskFormatError(
        f"task {task.name}: {len(empty)} clip(s) hold 0 samples of audio (a header only): {named}{more}; "
        f"a clip without sound cannot be scored: remake the task folder, or take the clip(s) out of their "
        f"split's .json in {task.directory}"
    )


def _frames(path: Path) -> int:
    """Samples per channel, from the header alone."""
    try:
        return soundfile.info(path).frames
    except (RuntimeError, soundfile.LibsndfileError) as error:
        raise TaskFormatError(f"cannot read task audio {path}: {error}") from None


def read_checked_tasks(tasks_dir: str | Path, names: list[str] | None = None) -> list[TaskInfo]:
    """The tasks under `tasks_dir` (optionally only `names`), each checked by `check_task_files`:
    labels, file names and audio headers, under a second for the default tasks, so that an
    evaluation names a damaged task before any model work rather than after it."""
    tasks = [read_task_info(directory) for directory in list_task_dirs(tasks_dir, names)]
    for task in tasks:
        check_task_files(task)
    return tasks


def list_task_dirs(tasks_dir: str | Path, names: list[str] | None = None) -> list[Path]:
    """Task directories under `tasks_dir`, optionally only `names` (unknown names are an error)."""
    root = Path(tasks_dir)
    blocker = next((p for p in [root, *root.parents] if p.exists()), None)
    if blocker is not None and not blocker.is_dir():
        # Building the tasks there would fail too: say what blocks the path instead.
        raise TaskFormatError(
            f"tasks directory {root}: {blocker} is a file, not a directory; pass --tasks-dir DIR, or set "
            "$AUDIOSCALE_HOME to a folder (the default tasks live in $AUDIOSCALE_HOME/tasks)"
        )
    if not root.is_dir():
        raise TaskFormatError(
            f"tasks directory {root} does not exist; build it with `python -m pipeline.corpus tasks --output {root}`"
        )
    available = sorted(p.parent.name for p in root.glob("*/task_metadata.json"))
    if names is None:
        if not available:
            raise TaskFormatError(f"no HEAR tasks (*/task_metadata.json) under {root}")
        return [root / name for name in available]
    missing = [name for name in names if name not in available]
    if missing:
        raise TaskFormatError(f"unknown task(s) {missing} under {root}; available: {available}")
    return [root / name for name in names]
