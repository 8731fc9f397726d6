"""Write one task in the HEAR task-directory format, plus the per-clip source metadata.

Layout (HEAR 2021): `<task>/task_metadata.json`, `<task>/labelvocabulary.csv` (idx,label),
`<task>/<split>.json` ({file name: [label]}), audio in `<task>/16000/<split>/<file name>`.
Added here: `<task>/clip_sources.json` ({split: {file name: {speaker / kit / soundfont ...}}}),
which is what the tests check the held-out splits against.
"""

from __future__ import annotations

import collections
import dataclasses
import json
from pathlib import Path

import numpy as np

from pipeline.corpus.sources.audio_io import write_wav_16k
from pipeline.corpus.tasks.clip_shaping import seconds_to_samples
from pipeline.session.worker_pool import map_ordered

SPLITS = ("train", "valid", "test")
TASK_FORMAT_VERSION = "audioscale-1"


@dataclasses.dataclass(frozen=True, kw_only=True)
class TaskSpec:
    name: str
    description: str
    labels: tuple[str, ...]  # the vocabulary, in index order
    sample_duration_s: float
    held_out: str  # what the test split holds out, e.g. "soundfont"
    notes: str = ""  # caveats a user must know (confounds, small sizes)
    label_kind: str = (
        ""  # what the labels name; LANGUAGE_LABEL_KIND marks language-ID tasks (pipeline.task_format.reader)
    )


@dataclasses.dataclass(frozen=True, kw_only=True)
class LabeledClip:
    split: str
    label: str
    wave: np.ndarray  # float32 (samples,) at 16 kHz, exactly sample_duration_s long
    source: dict  # where the audio came from: speaker, kit, soundfont, voice, prompt id ...


@dataclasses.dataclass(frozen=True, kw_only=True)
class TaskBuild:
    """What a task builder returns: the spec, the clips, and the source files it could not use."""

    spec: TaskSpec
    clips: list[LabeledClip]
    skipped: list[dict] = dataclasses.field(default_factory=list)  # [{"path", "reason"}]


def _dump_json(path: Path, value: object) -> None:
    path.write_text(json.dumps(value, indent=1, sort_keys=True, ensure_ascii=False) + "\n", encoding="utf-8")


def validate_clips(spec: TaskSpec, clips: list[LabeledClip]) -> None:
    n_samples = seconds_to_samples(spec.sample_duration_s)
    for clip in clips:
        if clip.split not in SPLITS or clip.label not in spec.labels:
            raise ValueError(
                f"task {spec.name}: clip with split {clip.split!r} / label {clip.label!r} is outside the spec"
            )
        if clip.wave.shape != (n_samples,) or clip.wave.dtype != np.float32:
            raise ValueError(
                f"task {spec.name}: clip shaped {clip.wave.shape} {clip.wave.dtype}, expected ({n_samples},) float32"
            )
    for split in SPLITS:
        if not any(clip.split == split for clip in clips):
            raise ValueError(f"task {spec.name}: split {split!r} is empty")


def write_hear_task(tasks_dir: Path, build: TaskBuild, *, mode: str) -> dict:
    """Write the task directory; returns its entry for the `tasks.json` index."""
    spec, clips = build.spec, build.clips
    validate_clips(spec, clips)
    task_dir = tasks_dir / spec.name
    split_labels: dict[str, dict[str, list[str]]] = {split: {} for split in SPLITS}
    split_sources: dict[str, dict[str, dict]] = {split: {} for split in SPLITS}
    jobs = []
    for clip in clips:
        file_name = f"{len(split_labels[clip.split]):05d}.wav"
        split_labels[clip.split][file_name] = [clip.label]
        split_sources[clip.split][file_name] = clip.source
        jobs.append((task_dir / "16000" / clip.split / file_name, clip.wave))
    map_ordered(lambda job: write_wav_16k(*job), jobs)
    for split in SPLITS:
        _dump_json(task_dir / f"{split}.json", split_labels[split])
    _dump_json(task_dir / "clip_sources.json", split_sources)
    (task_dir / "labelvocabulary.csv").write_text(
        "idx,label\n" + "".join(f"{index},{label}\n" for index, label in enumerate(spec.labels))
    )
    metadata = {
        "task_name": spec.name,
        "version": TASK_FORMAT_VERSION,
        "mode": mode,
        "embedding_type": "scene",
        "prediction_type": "multiclass",
        "split_mode": "trainvaltest",
        "splits": list(SPLITS),
        "sample_duration": spec.sample_duration_s,
        "evaluation": ["top1_acc"],
        "description": spec.description,
        "held_out": spec.held_out,
        "notes": spec.notes,
        "skipped_sources": build.skipped,
        "label_kind": spec.label_kind,
    }
    _dump_json(task_dir / "task_metadata.json", metadata)
    counts = {
        split: dict(sorted(collections.Counter(labels[0] for labels in split_labels[split].values()).items()))
        for split in SPLITS
    }
    return {
        "task_name": spec.name,
        "n_classes": len(spec.labels),
        "held_out": spec.held_out,
        "sample_duration": spec.sample_duration_s,
        "split_sizes": {split: len(split_labels[split]) for split in SPLITS},
        "class_counts": counts,
    }
