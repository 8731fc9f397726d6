"""A study's baselines: measured on its own tasks with its own probe before its trials, logged as child runs.

Which baselines and how they are measured is pipeline.evaluate.baselines'; this module picks the
study's reference model (its first trial's, read out as every checkpoint is, with the input
normalisation of that trial's shards), reuses results cached in the home's cache folder (keyed by
the task folder's fingerprint and the probe), and writes one child run per baseline
(sweeps.record.baseline) that the report compares the trials with.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

from pipeline.audio.frontend import get_preset
from pipeline.evaluate.baselines import BaselineSetup, measure_baselines
from pipeline.evaluate.positive_control import ControlConfig
from pipeline.paths import audioscale_home
from pipeline.shards.format import read_manifest
from pipeline.tracking import runs as tracking
from sweeps.record.baseline import BaselineRecord
from sweeps.record.keys import STUDY_EXPERIMENT
from sweeps.study.context import StudyContext
from sweeps.study.grids import TrialSpec
from sweeps.study.trial import study_shards_dir, trial_pretrain_config

BASELINE_SEED = 0  # the initialisation baseline's weights; each trial's own step 0 has its own seed


def study_baseline_setup(
    reference: TrialSpec, context: StudyContext, *, kinds: tuple[str, ...], control_steps: int
) -> BaselineSetup:
    """The baselines of a study whose reference model is `reference`'s (the first trial of the grid)."""
    config = trial_pretrain_config(reference, context)
    model = config.describe_model()
    shards = study_shards_dir(context.shards_root, model.spec.frontend_preset, reference.max_hours)
    manifest = read_manifest(shards)
    # The checkpoints' own rule (pipeline.evaluate.embeddings.normalisation_for): per clip, or the shards' stats.
    per_clip = get_preset(model.spec.frontend_preset).normalize_per_clip
    return BaselineSetup(
        tasks_dir=context.tasks_dir,
        model_name=reference.model_name,
        model_overrides=dict(reference.model_overrides or {}),
        probe=context.probe,
        bin_mean=() if per_clip else tuple(float(v) for v in manifest["mean"]),
        bin_std=() if per_clip else tuple(float(v) for v in manifest["std"]),
        seed=BASELINE_SEED,
        # the crops every checkpoint's readout is calibrated on: its RankMe pool's shards
        calibration_shards=str(config.rankme_shards_dir or shards),
        crop_frames=int(config.crop_frames or model.spec.crop_frames),
        kinds=kinds,
        control=ControlConfig(steps=control_steps, seed=BASELINE_SEED),
    )


def log_study_baselines(
    setup: BaselineSetup, context: StudyContext, say: Callable[[str], None]
) -> list[BaselineRecord]:
    """Measure (or reuse) the baselines and write each as a child run of the study run."""
    scores = measure_baselines(setup, cache_dir=audioscale_home() / "cache" / "baselines", progress=say)
    records = []
    for score in scores:
        record = BaselineRecord.of(score)
        # The run is written after the measurement: it starts when the measurement did and lasts as
        # long (a reused score keeps its measurement's time), so the UI's Duration is the baseline's.
        seconds = score.seconds if math.isfinite(score.seconds) else 0.0
        run = tracking.start_or_resume_run(
            tracking_uri=context.tracking_uri, experiment_name=STUDY_EXPERIMENT,
            run_name=record.run_name(context.study_name), parent_run_id=context.parent_run_id,
            start_time_ms=int(1000 * (time.time() - seconds)),
        )  # fmt: skip
        record.write(run, score.q_replicates)
        run.finish_after(seconds)
        say(f"baseline {score.name}: Q {score.q:.4f} ({score.description}; {score.seconds:.0f} s)")
        records.append(record)
    return records
