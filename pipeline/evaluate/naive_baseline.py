"""The naive probe every learned model must beat: mean and std of log-mel over time -> logistic regression.

Features use the shared front end (`pipeline.audio.frontend`, preset "audiomae": 128 mel bins); the
regularisation strength is picked on the valid split, accuracy is reported on test.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import soundfile
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from pipeline.audio.frontend import compute_log_mel, get_preset
from pipeline.session.worker_pool import map_ordered

C_GRID = (0.01, 0.1, 1.0, 10.0)


@dataclasses.dataclass(frozen=True, kw_only=True)
class BaselineResult:
    task_name: str
    n_classes: int
    test_accuracy: float
    valid_accuracy: float
    chance_accuracy: float  # 1 / n_classes
    majority_accuracy: float  # always predicting the most frequent train label, scored on test
    chosen_c: float


def clip_features(path: Path, preset_name: str = "audiomae") -> np.ndarray:
    """(2 * n_mels,) float64: per-bin mean and std of the log-mel over time."""
    wave, _ = soundfile.read(str(path), dtype="float32")
    log_mel = compute_log_mel(wave, get_preset(preset_name))  # (frames, n_mels)
    return np.concatenate([log_mel.mean(axis=0), log_mel.std(axis=0)]).astype(np.float64)


def load_split(task_dir: Path, split: str) -> tuple[np.ndarray, np.ndarray]:
    """(features (n, 2 * n_mels), labels (n,)) of one split, in file-name order."""
    labels_by_file = json.loads((task_dir / f"{split}.json").read_text())
    files = sorted(labels_by_file)
    features = map_ordered(lambda name: clip_features(task_dir / "16000" / split / name), files)
    return np.stack(features), np.array([labels_by_file[name][0] for name in files])


def evaluate_task(task_dir: Path) -> BaselineResult:
    train_x, train_y = load_split(task_dir, "train")
    valid_x, valid_y = load_split(task_dir, "valid")
    test_x, test_y = load_split(task_dir, "test")
    best = None
    for c in C_GRID:
        model = make_pipeline(StandardScaler(), LogisticRegression(C=c, max_iter=2000))
        model.fit(train_x, train_y)
        valid_accuracy = float((model.predict(valid_x) == valid_y).mean())
        if best is None or valid_accuracy > best[0]:
            best = (valid_accuracy, c, model)
    valid_accuracy, chosen_c, model = best
    n_classes = len((task_dir / "labelvocabulary.csv").read_text().strip().splitlines()) - 1
    labels, counts = np.unique(train_y, return_counts=True)
    majority_label = labels[int(np.argmax(counts))]
    return BaselineResult(
        task_name=task_dir.name,
        n_classes=n_classes,
        test_accuracy=float((model.predict(test_x) == test_y).mean()),
        valid_accuracy=valid_accuracy,
        chance_accuracy=1.0 / n_classes,
        majority_accuracy=float((test_y == majority_label).mean()),
        chosen_c=chosen_c,
    )


def run_baseline(tasks_dir: Path, task_names: list[str] | None = None) -> list[BaselineResult]:
    index = json.loads((Path(tasks_dir) / "tasks.json").read_text())
    names = [entry["task_name"] for entry in index["tasks"] if task_names is None or entry["task_name"] in task_names]
    return [evaluate_task(Path(tasks_dir) / name) for name in names]


def format_table(results: list[BaselineResult]) -> str:
    lines = ["| task | classes | test acc | valid acc | chance | majority | C |", "|---|---|---|---|---|---|---|"]
    lines += [
        f"| {r.task_name} | {r.n_classes} | {r.test_accuracy:.3f} | {r.valid_accuracy:.3f} | {r.chance_accuracy:.3f} | "
        f"{r.majority_accuracy:.3f} | {r.chosen_c:g} |"
        for r in results
    ]
    return "\n".join(lines)
