"""Reference points for Q, measured on a study's own tasks with its own probe: what a trained
checkpoint has to beat before its Q means anything.

- `naive`: log-mel mean and std over time per clip (pipeline.evaluate.naive_baseline.clip_features),
  no model at all.
- `initialisation`: the study's encoder with random weights (seed `BaselineSetup.seed`), read out
  exactly as every checkpoint is (the model's `embed`, time-averaged: pipeline.evaluate.task_embeddings;
  running statistics re-estimated on the study's calibration crops: pipeline.rankme.readout_stats).
- `control`: that same encoder trained supervised on the tasks' training clips
  (pipeline.evaluate.positive_control): a representation that provably carries the labels, so
  `control - initialisation` is the headroom Q has on these tasks.

Every score is the probe's test score with its test-clip bootstrap replicates (Q per replicate =
the mean over tasks). The replicates are drawn from the test split's size and a fixed seed only
(pipeline.evaluate.probes.bootstrap), so replicate b of a baseline and replicate b of any checkpoint
resample the same clips: their difference has a paired interval (pipeline.evaluate.scores.paired_interval).

Results are cached in a JSON file named by a digest of everything they depend on (the task folder's
fingerprint, the probe, the model and its input normalisation, the seed, the control's recipe), so a
study re-measures them only when one of those changes.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import torch

from models import build_model
from pipeline.evaluate.embeddings import FrameEmbedder, MelNormalisation
from pipeline.evaluate.naive_baseline import clip_features
from pipeline.evaluate.positive_control import ControlConfig, train_positive_control
from pipeline.evaluate.probes.scene import probe_task, scene_probe, split_arrays
from pipeline.evaluate.probes.seeds import fold_test_replicates
from pipeline.evaluate.scores import quality_q, quality_q_replicates
from pipeline.evaluate.task_embeddings import embed_task
from pipeline.rankme.pool import RankMePool
from pipeline.rankme.readout_stats import calibrate_for_readout, calibration_pool
from pipeline.session.worker_pool import map_ordered
from pipeline.task_format.reader import (
    TaskInfo,
    encode_targets,
    list_task_dirs,
    probe_splits,
    read_split_labels,
    read_task_info,
    split_audio_path,
)

NAIVE, INITIALISATION, CONTROL = "naive", "initialisation", "control"
BASELINES = (NAIVE, INITIALISATION, CONTROL)
# Bump when the way a baseline is measured changes: cached results from before are not reused.
# 2: a partial last patch is kept only when its centre is audio (embeddings.INPUT_RULE); 3: running
# statistics re-estimated on the calibration crops before each readout.
BASELINE_VERSION = 3


@dataclass(frozen=True, kw_only=True)
class BaselineSetup:
    """What the baselines of one study depend on (plain values: it is hashed into the cache key)."""

    tasks_dir: str
    model_name: str
    model_overrides: dict = field(default_factory=dict)
    probe: str = "knn"  # the study's scene probe (pipeline.evaluate.probes.scene.scene_probe)
    # The per-bin mean and std of the study's shards (the checkpoints' input normalisation); empty for
    # a per-clip preset.
    bin_mean: tuple[float, ...] = ()
    bin_std: tuple[float, ...] = ()
    seed: int = 0  # the initialisation's weights, and the control's start and batches
    # The shards whose calibration crops re-estimate the model's running statistics before each readout
    # (the study's RankMe pool shards, as for every checkpoint: pipeline.rankme.readout_stats), and the
    # crop length; empty: the statistics stay as they are (a model without them, or no shards).
    calibration_shards: str = ""
    crop_frames: int = 0
    kinds: tuple[str, ...] = (NAIVE, INITIALISATION, CONTROL)  # which baselines, in this order
    control: ControlConfig = ControlConfig()

    def __post_init__(self) -> None:
        unknown = sorted(set(self.kinds) - set(BASELINES))
        if unknown:
            raise ValueError(f"unknown baseline(s) {unknown}; choose from {', '.join(BASELINES)}")


@dataclass(frozen=True, kw_only=True)
class BaselineScore:
    name: str  # NAIVE | INITIALISATION | CONTROL
    q: float
    task_scores: dict[str, float]
    q_replicates: tuple[float, ...]  # Q on each paired test-clip resample; () for a seeded (MLP) probe
    seconds: float
    description: str

    def to_dict(self) -> dict:
        return asdict(self) | {"q_replicates": list(self.q_replicates)}

    @classmethod
    def from_dict(cls, data: dict) -> BaselineScore:
        return cls(**{**data, "q_replicates": tuple(data["q_replicates"])})


def task_folder_fingerprint(tasks_dir: str | Path, task_names: list[str] | None = None) -> str:
    """A digest of a task folder: every label and metadata file's content, every audio file's name
    and size. A relabelled split, an added, removed or resized clip changes it; rewriting a clip
    with the same number of bytes does not (hashing every clip of a large task set costs minutes)."""
    digest = hashlib.sha256()
    for task_dir in list_task_dirs(tasks_dir, task_names):
        for path in sorted(p for p in Path(task_dir).rglob("*") if p.is_file()):
            relative = path.relative_to(tasks_dir).as_posix()
            digest.update(relative.encode())
            digest.update(path.read_bytes() if path.suffix == ".json" else str(path.stat().st_size).encode())
    return digest.hexdigest()[:24]


def _calibration(setup: BaselineSetup) -> RankMePool | None:
    return (
        calibration_pool(setup.calibration_shards, crop_frames=setup.crop_frames) if setup.calibration_shards else None
    )


def baseline_key(setup: BaselineSetup) -> str:
    calibration = _calibration(setup)
    facts = asdict(setup) | {
        "tasks_dir": task_folder_fingerprint(setup.tasks_dir),
        # which crops, not where they are stored: the same shards moved to a bucket keep their results
        "calibration_shards": calibration.fingerprint if calibration else "",
        "version": BASELINE_VERSION,
    }
    return hashlib.sha256(json.dumps(facts, sort_keys=True, default=str).encode()).hexdigest()[:24]


def _scored(tasks: list[TaskInfo], splits_of: Callable[[TaskInfo], dict], probe: str) -> tuple[dict, tuple]:
    """({task: test score}, Q per bootstrap replicate) of one representation under the study's probe."""
    scores, replicates = {}, []
    for task in tasks:
        score, results = probe_task(task, splits_of(task), seeds=1, training=scene_probe(probe))
        scores[task.name] = score.mean
        replicates.append(fold_test_replicates(results))
    return scores, quality_q_replicates(replicates)


def naive_splits(task: TaskInfo) -> dict:
    """The naive features of every split the probe needs, clips in embed_task's (sorted) order."""
    needed = sorted({name for fold in probe_splits(task) for name in (*fold.train, fold.valid, fold.test)})
    splits = {}
    for split in needed:
        labels = read_split_labels(task, split)
        names = sorted(labels)
        features = map_ordered(lambda name, s=split: clip_features(split_audio_path(task, s, name)), names)
        targets = encode_targets(task, [labels[n] for n in names])
        splits[split] = split_arrays(np.stack(features).astype(np.float32), targets)
    return splits


def _embedder(setup: BaselineSetup) -> FrameEmbedder:
    torch.manual_seed(setup.seed)
    model = build_model(setup.model_name, **setup.model_overrides)
    if setup.bin_mean:
        normalisation = MelNormalisation(
            per_clip=False,
            bin_mean=np.asarray(setup.bin_mean, np.float32),
            bin_std=np.asarray(setup.bin_std, np.float32),
        )
    else:  # no dataset statistics: the embedder's per-clip standardisation, as for a checkpoint without them
        normalisation = None
    return FrameEmbedder(model.eval(), normalisation=normalisation)


def model_label(setup: BaselineSetup) -> str:
    """'mae-debug (encoder_dim=128, pooled_vc_weight=3.0)': the model as the study builds it."""
    overrides = ", ".join(f"{key}={value}" for key, value in sorted(setup.model_overrides.items()))
    return f"{setup.model_name} ({overrides})" if overrides else setup.model_name


def _model_baselines(setup: BaselineSetup, tasks: list[TaskInfo], say) -> list[BaselineScore]:
    """The initialisation, then the control trained from it (the same seed: their difference is the
    headroom); each read out as a checkpoint is, its running statistics re-estimated on the calibration crops."""
    embedder, results, model, calibration = _embedder(setup), [], model_label(setup), _calibration(setup)
    if calibration is not None:
        calibrate_for_readout(embedder.model, calibration, device=embedder.device)
    if INITIALISATION in setup.kinds:
        say(f"baselines: {model} at initialisation (seed {setup.seed})")
        results.append(_measure(INITIALISATION, f"{model}, random weights (seed {setup.seed})", tasks,
                                lambda task: embed_task(task, embedder).splits, setup.probe))  # fmt: skip
    if CONTROL in setup.kinds:
        tick = time.perf_counter()
        say(f"baselines: training the positive control ({setup.control.steps} supervised steps)")
        losses = train_positive_control(embedder, tasks, setup.control, progress=say)
        if calibration is not None:  # training moved the statistics as it moves a checkpoint's
            calibrate_for_readout(embedder.model, calibration, device=embedder.device)
        description = (f"{model} trained supervised on the tasks' training clips ({setup.control.steps} "
                       f"steps, loss {np.mean(losses[: len(tasks)]):.2f} -> {np.mean(losses[-len(tasks) :]):.2f})")  # fmt: skip
        control = _measure(CONTROL, description, tasks, lambda task: embed_task(task, embedder).splits, setup.probe)
        results.append(BaselineScore.from_dict(control.to_dict() | {"seconds": time.perf_counter() - tick}))
    return results


def _measure(name: str, description: str, tasks, splits_of, probe: str) -> BaselineScore:
    started = time.perf_counter()
    scores, replicates = _scored(tasks, splits_of, probe)
    return BaselineScore(name=name, q=quality_q(scores), task_scores=scores, q_replicates=replicates,
                         seconds=time.perf_counter() - started, description=description)  # fmt: skip


def measure_baselines(
    setup: BaselineSetup, *, cache_dir: str | Path | None = None, progress: Callable[[str], None] | None = None
) -> list[BaselineScore]:
    """The baselines `setup.kinds` names, scored on `setup.tasks_dir`; read from `cache_dir` when
    measured before for this setup."""
    say = progress or (lambda line: None)
    cached = Path(cache_dir) / f"{baseline_key(setup)}.json" if cache_dir else None
    if cached is not None and cached.exists():
        say(f"baselines: reusing {cached}")
        return [BaselineScore.from_dict(entry) for entry in json.loads(cached.read_text())]
    tasks = [read_task_info(d) for d in list_task_dirs(setup.tasks_dir)]
    results = []
    if NAIVE in setup.kinds:
        say(f"baselines: naive features on {len(tasks)} tasks")
        results.append(_measure(NAIVE, "log-mel mean and std over time", tasks, naive_splits, setup.probe))
    if INITIALISATION in setup.kinds or CONTROL in setup.kinds:
        results += _model_baselines(setup, tasks, say)
    if cached is not None:
        cached.parent.mkdir(parents=True, exist_ok=True)
        partial = cached.with_suffix(".partial")
        partial.write_text(json.dumps([r.to_dict() for r in results]))
        partial.replace(cached)  # atomic: a reader never sees half a file
    return results
