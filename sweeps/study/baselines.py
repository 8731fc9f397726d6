"""A study's baselines: measured on its own tasks with its own probe beside its trials, logged as child runs.

Which baselines and how they are measured is pipeline.evaluate.baselines'; this module picks the
study's reference model (its first trial's, read out as every checkpoint is, with the input
normalisation of that trial's shards), reuses results cached in the home's cache folder (keyed by
the task folder's fingerprint and the probe), and writes one child run per baseline
(sweeps.record.baseline) that the report compares the trials with.

`BaselinesInProgress` measures them in a thread of the driver while Tune runs the trials: the
positive control trains for minutes on one core, which the trials would otherwise wait for. The
driver starts it once the last trial has started, so it takes the core the trials no longer fill
(the last trial of 5 on 2 cores runs alone). Started with the first trials, it took the study as
long (trials and baselines 10.6 against 10.7 min) but held the first two trials' results back from
2m50s to 5m18s, as three shared two cores (docs/performance.md). The driver computes on one torch
thread meanwhile (the count is per process, and one thread keeps the control's numbers the same
from run to run); the core it uses is not one of Ray's logical CPUs.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable

import torch

from pipeline.audio.frontend import get_preset
from pipeline.evaluate.baselines import BaselineSetup, measure_baselines
from pipeline.evaluate.positive_control import ControlConfig
from pipeline.shards.format import read_manifest
from pipeline.storage.paths import audioscale_home
from pipeline.tracking import runs as tracking
from sweeps.record.baseline import BaselineRecord
from sweeps.record.keys import BASELINE_TAG, STUDY_EXPERIMENT
from sweeps.study.context import StudyContext
from sweeps.study.grids import TrialSpec
from sweeps.study.trainable import study_shards_dir, trial_pretrain_config

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
        calibration_shards=str(config.data.rankme_shards_dir or shards),
        crop_frames=int(config.model.crop_frames or model.spec.crop_frames),
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
        run = start_baseline_run(record, context, seconds)
        record.write(run, score.q_replicates)
        run.finish_after(seconds)
        say(f"baseline {score.name}: Q {score.q:.4f} ({score.description}; {score.seconds:.0f} s)")
        records.append(record)
    return records


def start_baseline_run(record: BaselineRecord, context: StudyContext, seconds: float) -> tracking.TrackedRun:
    """The baseline's child run, tagged a baseline from its creation: a reader of the study (the laws
    fitted while the baselines end: sweeps.study.fits_beside) never takes it for a trial."""
    return tracking.start_or_resume_run(
        tracking_uri=context.tracking_uri, experiment_name=STUDY_EXPERIMENT,
        run_name=record.run_name(context.study_name), parent_run_id=context.parent_run_id,
        start_time_ms=int(1000 * (time.time() - seconds)), tags={BASELINE_TAG: record.name},
    )  # fmt: skip


class BaselinesInProgress:
    """The baselines, measured in a driver thread from `start()`; `wait()` returns their records once
    done, or raises what the measurement raised."""

    def __init__(self, setup: BaselineSetup, context: StudyContext, say: Callable[[str], None]) -> None:
        self._records: list[BaselineRecord] = []
        self._error: BaseException | None = None
        self._threads_before = torch.get_num_threads()
        self.seconds = math.nan
        self._thread = threading.Thread(
            target=self._measure, args=(setup, context, say), name="study-baselines", daemon=True
        )  # daemon: Ctrl-C on the study does not wait for the control to finish training

    def _measure(self, setup: BaselineSetup, context: StudyContext, say: Callable[[str], None]) -> None:
        started = time.monotonic()
        try:
            self._records = log_study_baselines(setup, context, say)
        except BaseException as error:  # handed to `wait`, in the driver's own thread
            self._error = error
        finally:
            self.seconds = time.monotonic() - started

    def start(self) -> BaselinesInProgress:
        """Start measuring (once: a second call does nothing)."""
        if not self._thread.ident:  # never started
            torch.set_num_threads(1)  # one core: the trials have the rest
            self._thread.start()
        return self

    @property
    def finished(self) -> bool:
        """Started and ended (measured, or raised)."""
        return bool(self._thread.ident) and not self._thread.is_alive()

    def wait(self) -> list[BaselineRecord]:
        """Their records, once measured (started now if it was not yet)."""
        self.start()
        self._thread.join()
        torch.set_num_threads(self._threads_before)  # the fits after them have the driver's cores back
        if self._error is not None:
            raise self._error
        return self._records
