"""A trial's record: what its child run holds (sweeps.record.keys' convention), written and read back typed.

`TrialRecord.write` is the one writer of a finished trial; `TrialRecord.from_run` reads it back
from `tracking.read_run`'s dictionary; `trial_row` is the trial table's view of any child run
(failed, stopped and unfinished ones too, and studies logged by older versions), with NaN where a
run does not say. Trials stopped or failed are marked by `mark_trial_stopped_early` and
`mark_trial_failed`.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from pipeline.tracking import runs as tracking
from pipeline.tracking.keys import READOUT_AND_INPUT_KEYS
from sweeps.record import keys
from sweeps.record.checkpoint_point import (
    CheckpointPoint,
    points_column,
    read_checkpoint_points,
    write_checkpoint_points,
)
from sweeps.record.rankme_pool import RankMePoolRecord
from sweeps.record.replicates import write_q_replicates

RunDict = dict[str, Any]  # tracking.read_run's dictionary of one run


@dataclass(frozen=True, kw_only=True)
class TrialRecord:
    trial: str
    model_name: str
    arch: str
    n_params: int
    hours: float
    flops: float  # training FLOPs, Kaplan's 6 x params x tokens processed
    mask_ratio: float
    rankme: float  # final checkpoint, on the RankMe pool: the R of Q(R)
    rankme_by_step: dict[int, float]  # over training: early prediction
    q: float
    task_scores: dict[str, float] = field(default_factory=dict)
    # 95% interval of Q (sweeps.study.trainable.q_interval): over probe seeds, or over test clips for the
    # deterministic probes (`q_interval_over` says which); NaN where neither exists.
    q_ci_low: float = math.nan
    q_ci_high: float = math.nan
    q_interval_over: str = ""
    configuration: str | None = None  # bootstrap unit; defaults to the trial name
    # How it was written, not a fact of the trial: pretraining already wrote `rankme` into this run.
    rankme_history_logged: bool = field(default=False, compare=False)
    # What makes `rankme` comparable (pipeline.rankme.model_rankme.PoolRankMe): N, the pool, N < 8 K.
    rankme_n: int = 0
    rankme_pool: str = ""
    rankme_capped: bool = False
    # The evaluation's diagnostic RankMe on task audio (never R); NaN: not measured.
    task_rankme: float = math.nan
    probe_seeds: int = 0  # probe seeds behind q_ci_low/high (sweeps.report.intervals); 0: unknown
    coordinates: dict[str, Any] = field(default_factory=dict)  # grid name -> this trial's value on it
    checkpoint_points: dict[int, CheckpointPoint] = field(default_factory=dict)  # step -> (R, Q) of that checkpoint
    scale: str | None = None  # Table V's column ("base" / "large") of an architecture grid point
    # The pool R was measured on, for the study run (sweeps.record.rankme_pool), not the child run.
    pool: RankMePoolRecord | None = field(default=None, compare=False)
    # Q per paired test-clip resample at each evaluated step (sweeps.record.replicates): written as an
    # artifact, read back on demand by the report (read_q_replicates), not by `from_run`.
    q_replicates: dict[int, tuple[float, ...]] = field(default_factory=dict, compare=False)
    # How its checkpoints were read (pipeline.evaluate.run.READOUT_AND_INPUT_KEYS: the readout and its
    # calibration set, the input normalisation and its statistics): a Q compares only with one read alike.
    reading: dict[str, Any] = field(default_factory=dict)

    def write(self, run: tracking.TrackedRun, *, study_run: tracking.TrackedRun | None = None) -> None:
        """Write the finished trial into its child run (its last checkpoint is the trial's own result)
        and, given the study run, the pool it measured R on there, unless an earlier trial did."""
        if study_run is not None and self.pool is not None:
            self.pool.write_once(study_run)
        run.log_params(self._params())
        # What the run already holds, not only this attempt's history: a trial resumed after Ctrl-C
        # has the step-0 R its first attempt logged, which its resumed pretraining does not report.
        logged = run.logged_steps(keys.RANKME_METRIC)
        if not self.rankme_history_logged:
            for step, value in sorted(self.rankme_by_step.items()):
                if step not in logged:
                    run.log_metrics({keys.RANKME_METRIC: value}, step=step)
            logged |= set(self.rankme_by_step)  # now in the run: logged just above
        final_step = max(self.rankme_by_step, default=0)
        write_checkpoint_points(
            run, self.checkpoint_points, last_step=final_step, rankme_logged_at=logged | set(self.rankme_by_step)
        )
        final = CheckpointPoint(rankme=self.rankme, q=self.q, task_scores=self.task_scores,
                                q_ci=(self.q_ci_low, self.q_ci_high))  # fmt: skip
        diagnostic = {keys.TASK_RANKME_METRIC: self.task_rankme} if np.isfinite(self.task_rankme) else {}
        # R at the last step is usually in the history already (above, or pretraining's): one value per
        # step, so MLflow's own charts of Q against R pair the right points.
        final_metrics = final.metrics(with_rankme=final_step not in logged)  # the points above are all earlier
        run.log_metrics({**final_metrics, keys.EVAL_RANKME_N_METRIC: self.rankme_n, **diagnostic}, step=final_step)
        write_q_replicates(run, self.q_replicates)
        run.set_tags({keys.STATUS_TAG: keys.STATUS_OK, keys.EVAL_RANKME_POOL_TAG: self.rankme_pool,
                      keys.EVAL_RANKME_CAPPED_TAG: self.rankme_capped})  # fmt: skip

    def _params(self) -> dict[str, Any]:
        return {
            keys.TRIAL_PARAM: self.trial, keys.MODEL_NAME_PARAM: self.model_name, keys.ARCH_PARAM: self.arch,
            "n_params": self.n_params, "hours": self.hours, "flops": self.flops,
            keys.MASK_RATIO_PARAM: self.mask_ratio, keys.CONFIGURATION_PARAM: self.configuration or self.trial,
            # The grid coordinate first in the UI's sorted params: `grid.mask_ratio` 0.7, `grid.size` w32d2.
            **{f"{keys.GRID_PARAM_PREFIX}{name}": value for name, value in self.coordinates.items()},
            **({keys.PROBE_SEEDS_PARAM: self.probe_seeds} if self.probe_seeds > 0 else {}),
            **({keys.Q_INTERVAL_OVER_PARAM: self.q_interval_over} if self.q_interval_over else {}),
            **({"scale": self.scale} if self.scale else {}),
            **self.reading,
        }  # fmt: skip

    @classmethod
    def from_run(cls, run: RunDict) -> TrialRecord:
        """The record `write` wrote, from the run's dictionary; `rankme_by_step` is every `rankme` step
        (training's and any checkpoint's), `checkpoint_points` every step with both R and Q."""
        params, metrics, tags = run["params"], run["metrics"], run["tags"]
        points = read_checkpoint_points(metrics)
        final = points.get(max(points)) if points else CheckpointPoint(rankme=math.nan, q=math.nan)
        return cls(
            trial=params[keys.TRIAL_PARAM], model_name=params[keys.MODEL_NAME_PARAM], arch=params[keys.ARCH_PARAM],
            n_params=int(number(params.get("n_params"))), hours=number(params.get("hours")),
            flops=number(params.get("flops")), mask_ratio=number(params.get(keys.MASK_RATIO_PARAM)),
            rankme=evaluated_rankme(metrics), q=final.q, task_scores=final.task_scores,
            rankme_by_step={int(step): value for step, value in metrics.get(keys.RANKME_METRIC, [])},
            q_ci_low=final.q_ci[0], q_ci_high=final.q_ci[1],
            q_interval_over=params.get(keys.Q_INTERVAL_OVER_PARAM, ""),
            configuration=params.get(keys.CONFIGURATION_PARAM), rankme_n=int(_last(metrics, keys.EVAL_RANKME_N_METRIC, 0)),
            rankme_pool=tags.get(keys.EVAL_RANKME_POOL_TAG, ""), rankme_capped=_true(tags.get(keys.EVAL_RANKME_CAPPED_TAG)),
            task_rankme=_last(metrics, keys.TASK_RANKME_METRIC), probe_seeds=int(params.get(keys.PROBE_SEEDS_PARAM, 0)),
            coordinates={key.removeprefix(keys.GRID_PARAM_PREFIX): _coordinate(value) for key, value in params.items()
                         if key.startswith(keys.GRID_PARAM_PREFIX)},
            checkpoint_points=points, scale=params.get("scale"),
            reading={key: _reading_value(params[key]) for key in READOUT_AND_INPUT_KEYS if key in params},
        )  # fmt: skip


def _reading_value(text: str) -> str | int:
    """MLflow keeps params as text: the calibration set's size back as the number it was."""
    return int(text) if text.isdigit() else text


def mark_trial_failed(run: tracking.TrackedRun, error: str, *, attempt_id: str = "") -> None:
    """Record the trial's error; `attempt_id`: the study driver's run that saw it (sweeps.study.driver)."""
    run.set_tags(
        {keys.STATUS_TAG: keys.STATUS_FAILED, keys.ERROR_TAG: error[:5000], keys.FAILED_IN_ATTEMPT_TAG: attempt_id}
    )
    run.finish("FAILED")


def mark_trial_stopped_early(
    run: tracking.TrackedRun, *, identity: dict[str, Any], stopped_at_step: int, rankme_by_step: dict[int, float]
) -> None:
    """Record a trial the early-stop scheduler stopped: its identity params, the RankMe it reached
    (steps pretraining did not already log) and the stop step; finished, not failed."""
    run.log_params(identity)
    logged = {
        int(step) for step, _ in tracking.read_run(run.tracking_uri, run.run_id)["metrics"].get(keys.RANKME_METRIC, [])
    }
    for step, value in sorted(rankme_by_step.items()):
        if step not in logged and step <= stopped_at_step:
            run.log_metrics({keys.RANKME_METRIC: value}, step=step)
    run.set_tags({keys.STATUS_TAG: keys.STATUS_STOPPED_EARLY, keys.STOPPED_AT_STEP_TAG: stopped_at_step})
    run.finish("FINISHED")


def trial_row(run: RunDict) -> dict[str, Any]:
    """One row of the trial table (sweeps.report.study_fits) from any child run of the study."""
    params, metrics, tags = run["params"], run["metrics"], run["tags"]
    row: dict[str, Any] = {name: params.get(name) for name in keys.TEXT_PARAMS}
    row.update({name: number(params.get(name)) for name in keys.NUMERIC_PARAMS})
    row[keys.RANKME_BY_STEP_COLUMN] = {int(step): value for step, value in metrics.get(keys.RANKME_METRIC, [])}
    row[keys.RANKME_METRIC] = evaluated_rankme(metrics)
    row[keys.PROBE_SEEDS_PARAM] = number(params.get(keys.PROBE_SEEDS_PARAM))
    if metrics.get(keys.TASK_RANKME_METRIC):
        row[keys.TASK_RANKME_METRIC] = _last(metrics, keys.TASK_RANKME_METRIC)
    row[keys.Q_METRIC] = _last(metrics, keys.Q_METRIC)
    if metrics.get(keys.TRAINING_LOSS_METRIC):  # the last logged training loss: the advisor's loss law
        row[keys.TRAIN_LOSS_COLUMN] = _last(metrics, keys.TRAINING_LOSS_METRIC)
    row.update(rankme_pool_columns(params, metrics, tags))
    for key in keys.Q_INTERVAL_KEYS:  # absent with one probe seed and in older studies
        row[key] = _last(metrics, key)
    row.update({key: history[-1][1] for key, history in metrics.items() if key.startswith(keys.TASK_SCORE_PREFIX)})
    failed = run["status"] == "FAILED"
    row[keys.STATUS_COLUMN] = tags.get(keys.STATUS_TAG, keys.STATUS_FAILED if failed else keys.STATUS_UNFINISHED)
    row[keys.STOPPED_AT_STEP_COLUMN] = float(tags.get(keys.STOPPED_AT_STEP_TAG, np.nan))
    row[keys.RUN_ID_COLUMN] = run["run_id"]
    row[keys.RUN_COLOUR_COLUMN] = tags.get(keys.RUN_COLOUR_TAG, "")
    row[keys.BEST_TRIAL_COLUMN] = keys.BEST_TRIAL_TAG in tags
    row[keys.POINTS_COLUMN] = points_column(metrics)
    converged = converged_flag(params, metrics, tags)
    if converged is not None:
        row[keys.CONVERGED_KEY] = converged
    return row


def evaluated_rankme(metrics: dict) -> float:
    """R of the scored checkpoint: `rankme` at the step Q was logged (studies before one name per
    quantity logged it as `eval_rankme`)."""
    if metrics.get(keys.LEGACY_EVAL_RANKME_METRIC):
        return metrics[keys.LEGACY_EVAL_RANKME_METRIC][-1][1]
    if not metrics.get(keys.Q_METRIC) or not metrics.get(keys.RANKME_METRIC):
        return np.nan
    q_step = metrics[keys.Q_METRIC][-1][0]
    at_step = [value for step, value in metrics[keys.RANKME_METRIC] if step == q_step]
    return at_step[-1] if at_step else np.nan


def rankme_pool_columns(params: dict, metrics: dict, tags: dict) -> dict[str, Any]:
    """N, pool and capped flag of the evaluation's R, and the pool and N training measured on."""
    return {
        keys.RANKME_N_KEY: _last(metrics, keys.EVAL_RANKME_N_METRIC),
        keys.RANKME_POOL_KEY: tags.get(keys.EVAL_RANKME_POOL_TAG, ""),
        keys.RANKME_CAPPED_KEY: _true(tags.get(keys.EVAL_RANKME_CAPPED_TAG)),
        # The config logs `rankme_n` as asked (null: the default); the N the pool held is logged
        # once it is known, which MLflow keeps as `resumed_param.rankme_n` (params never change).
        keys.TRAINING_RANKME_N_COLUMN: number(
            tags.get(keys.RESUMED_PARAM_PREFIX + keys.RANKME_N_KEY, params.get(keys.RANKME_N_KEY))
        ),
        keys.TRAINING_RANKME_POOL_COLUMN: params.get(keys.RANKME_POOL_KEY, ""),
    }


def converged_flag(params: dict, metrics: dict, tags: dict) -> bool | None:
    """The run's `converged` flag from a metric, param or tag; None when it has none."""
    if metrics.get(keys.CONVERGED_KEY):
        return bool(metrics[keys.CONVERGED_KEY][-1][1])
    for source in (params, tags):
        if keys.CONVERGED_KEY in source:
            return is_true_text(source[keys.CONVERGED_KEY])
    return None


def is_true_text(value: Any) -> bool:
    """A flag as MLflow keeps it (a param or tag is text): "true", "1", "1.0", "yes", any case."""
    return str(value).strip().lower() in {"true", "1", "1.0", "yes"}


def number(text: Any) -> float:
    """A logged parameter as a float; NaN when absent or not a number (a None logged as "null")."""
    try:
        return float(text)
    except (TypeError, ValueError):
        return np.nan


def _last(metrics: dict, key: str, default: float = np.nan) -> float:
    return metrics[key][-1][1] if metrics.get(key) else default


def _true(text: Any) -> bool:
    return str(text or "").lower() == "true"


def _coordinate(text: str) -> Any:
    """A grid coordinate as logged: JSON numbers come back as numbers, labels (`w32d2`) as text."""
    try:
        value = json.loads(text)
    except ValueError:
        return text
    return value if isinstance(value, (int, float)) else text
