"""Every MLflow name a study writes or reads, defined once (the stages' own names come from pipeline).

Child-run convention (sweeps.record.trial writes it and reads it back):
- params: trial, model_name, arch, n_params, hours, flops, mask_ratio, configuration, `grid.<grid>`
  (the trial's coordinate on each grid of the study), `probe_seeds` (when known), `q_interval_over`,
  `scale` (an architecture grid point's Table V column, "base" or "large", when it has one)
- metrics, one name per quantity: `rankme` is RankMe on the study's RankMe pool
  (pipeline.rankme.model_rankme), at each logged training step (pretraining writes it, with params
  `rankme_n`, `rankme_pool`) and at the scored checkpoint's step (the R of Q(R)), with
  `eval_rankme_n` and tags `eval_rankme_pool`, `eval_rankme_capped` (N < 8 K); `task_rankme` the
  evaluation's diagnostic on task audio (never R); `q` (quality), `q_ci_low` / `q_ci_high` (its 95%
  interval over probe seeds or test clips), `score/<task>`. Earlier checkpoints' `q`, `rankme`,
  `score/<task>` and interval sit at their own steps (sweeps.record.checkpoint_point). Studies
  logged before this convention have the checkpoint's R as `eval_rankme`; it is read as R.
- optional, written by pretraining when it knows them: param `train_steps` and param, metric or tag
  `converged`
- metric `on_q_c_frontier` (1 or 0), written by the study analysis: the trial is on Q(C)'s
  compute-efficiency frontier (paper Sec. IV-E), the points Eq. 6 is fitted to
- tag `mlflow.runColor`: the trial's colour in the study's figures and the UI's charts, pinned by
  the study analysis (sweeps.report.run_colours)
- tag `audioscale.trial_status`: "ok", "failed" (with `audioscale.trial_error`) or "stopped_early"
  (the RankMe early-stop scheduler stopped it at `audioscale.stopped_at_step`)
The study run itself holds params grid, profile, n_trials, probe; the artifact `rankme_pool.json`
(sweeps.record.rankme_pool); the analysis under `laws/`. An external point is a child tagged
`audioscale.external` (sweeps.record.external_point).
"""

from __future__ import annotations

from pipeline.tracking.keys import CONVERGED_KEY as CONVERGED_KEY
from pipeline.tracking.keys import CROP_FRAMES_PARAM as CROP_FRAMES_PARAM
from pipeline.tracking.keys import EVAL_RANKME_CAPPED_TAG as EVAL_RANKME_CAPPED_TAG
from pipeline.tracking.keys import EVAL_RANKME_N_METRIC as EVAL_RANKME_N_METRIC
from pipeline.tracking.keys import EVAL_RANKME_POOL_TAG as EVAL_RANKME_POOL_TAG
from pipeline.tracking.keys import INTERVAL_OVER_SEEDS, INTERVAL_OVER_TEST_CLIPS
from pipeline.tracking.keys import LEGACY_EVAL_RANKME_METRIC as LEGACY_EVAL_RANKME_METRIC
from pipeline.tracking.keys import Q_METRIC as Q_METRIC
from pipeline.tracking.keys import RANKME_CAPPED_KEY as RANKME_CAPPED_KEY
from pipeline.tracking.keys import RANKME_METRIC as RANKME_METRIC
from pipeline.tracking.keys import RANKME_N_KEY as RANKME_N_KEY
from pipeline.tracking.keys import RANKME_POOL_KEY as RANKME_POOL_KEY
from pipeline.tracking.keys import RESUMED_PARAM_PREFIX as RESUMED_PARAM_PREFIX
from pipeline.tracking.keys import TASK_RANKME_METRIC as TASK_RANKME_METRIC
from pipeline.tracking.keys import TRAIN_STEPS_PARAM as TRAIN_STEPS_PARAM

STUDY_EXPERIMENT = "audioscale-studies"

# What a trial's Q interval resamples (`q_interval_over`; sweeps.report.intervals judges each kind by its own rule).
Q_INTERVAL_OVER_SEEDS = INTERVAL_OVER_SEEDS
Q_INTERVAL_OVER_TEST_CLIPS = INTERVAL_OVER_TEST_CLIPS

# Between the trial and the study in a child run's name; trial and grid labels never contain it.
# ASCII without spaces: the name is also the trial's Ray Train run (a storage folder); a "·" made
# Ray Train's controller fail ("'ascii' codec can't encode character").
RUN_NAME_SEPARATOR = "@"
EXTERNAL_RUN_PREFIX = "external-"  # an external point's child run: `external-<label>@<study>`


def child_run_name(study_name: str, trial_name: str) -> str:
    """`mask0.70@mask_ratio-cpu_default`: the part that tells trials apart shows first in MLflow's
    narrow run-name column. Unique per (study, trial) and stable: pretraining resumes a run by it."""
    return f"{trial_name}{RUN_NAME_SEPARATOR}{study_name}"


# The study run: its params (the probe is part of the study: Q compares only within one probe) and tags.
GRID_PARAM = "grid"
PROFILE_PARAM = "profile"
N_TRIALS_PARAM = "n_trials"
PROBE_PARAM = "probe"
GRID_TAG = "audioscale.grid"
PROFILE_TAG = "audioscale.profile"
# The task set Q is over, against the profile's declared one (sweeps.protocol.task_set): "the paper's 16
# HEAR scene tasks (Sec. III-D)", or the accepted difference (missing / extra tasks, listed).
TASK_SET_TAG = "audioscale.task_set"
Q_TREND_TAG = "audioscale.q_trend"  # the Q(R) trend verdict in words
INCOMPLETE_TAG = "audioscale.incomplete"  # a refit of a study that did not finish: why, in one sentence
Q_C_FRONTIER_TAG = "audioscale.q_c_frontier"  # the trials Eq. 6 is fitted to
RANKME_POOL_ARTIFACT = "rankme_pool.json"  # the pool the study measured R on (sweeps.record.rankme_pool)
REPORT_DIR = "laws"  # the analysis' artifact folder: report.md and its figures side by side

# A trial's child run.
STATUS_TAG = "audioscale.trial_status"
ERROR_TAG = "audioscale.trial_error"
# Which run of the study driver recorded the failure: a retry within that run does not run it again.
FAILED_IN_ATTEMPT_TAG = "audioscale.failed_in_attempt"
STOPPED_AT_STEP_TAG = "audioscale.stopped_at_step"
STATUS_OK = "ok"
STATUS_FAILED = "failed"
STATUS_STOPPED_EARLY = "stopped_early"
STATUS_UNFINISHED = "unfinished"  # no status tag and not FAILED: the run never reported
DONE_STATUSES = (STATUS_OK, STATUS_STOPPED_EARLY)  # a resumed study does not re-run these
TRIAL_PARAM = "trial"
MODEL_NAME_PARAM = "model_name"
ARCH_PARAM = "arch"
MASK_RATIO_PARAM = "mask_ratio"
CONFIGURATION_PARAM = "configuration"
TRAIN_SEEDS_PARAM = "train_seeds"  # on the study run: training seeds per configuration
PROBE_SEEDS_PARAM = "probe_seeds"
Q_INTERVAL_OVER_PARAM = "q_interval_over"
GRID_PARAM_PREFIX = "grid."
# training_flops_per_sample, crop_frames: logged by pretraining into the trial run (sweeps.report.advice reads them).
NUMERIC_PARAMS = (
    "n_params", "hours", "flops", MASK_RATIO_PARAM, TRAIN_STEPS_PARAM, "training_flops_per_sample", "crop_frames",
)  # fmt: skip
TEXT_PARAMS = (TRIAL_PARAM, MODEL_NAME_PARAM, ARCH_PARAM, CONFIGURATION_PARAM, Q_INTERVAL_OVER_PARAM, "scale")
# Pretraining's logged loss (pipeline.pretrain.training_metrics); the trial table's `train_loss` is its last value.
TRAINING_LOSS_METRIC = "loss"
TRAIN_LOSS_COLUMN = "train_loss"
Q_CI_LOW = "q_ci_low"
Q_CI_HIGH = "q_ci_high"
Q_INTERVAL_KEYS = (Q_CI_LOW, Q_CI_HIGH)  # Q's 95% interval, where one was measured
TASK_SCORE_PREFIX = "score/"  # `score/<task>`: a metric in MLflow and a column of the trial table
ON_FRONTIER_METRIC = "on_q_c_frontier"  # 1 on Q(C)'s frontier, else 0

# An external point's child run (sweeps.record.external_point).
EXTERNAL_TAG = "audioscale.external"
HEAR_MODULE_TAG = "audioscale.hear_module"
MODEL_DIGEST_TAG = "audioscale.model_file_sha256"
LABEL_PARAM = "label"  # the point's name on the figure

# The study's best point (the summary's "best:" line), marked by the study analysis: on the study
# run the tag `audioscale.best_point` ("mask0.50 @43") and the metric `best_q`; on its trial's run
# the tag `audioscale.best` = "true" (a column of the study's view), removed from a trial that was
# best before a refit.
BEST_POINT_TAG = "audioscale.best_point"
BEST_Q_METRIC = "best_q"
BEST_TRIAL_TAG = "audioscale.best"

# A baseline's child run (sweeps.record.baseline): `baseline-<name>@<study>`, tagged with its name.
BASELINE_TAG = "audioscale.baseline"
BASELINE_RUN_PREFIX = "baseline-"
# Its Q and task scores are `baseline.q` and `baseline.score/<task>`, not a trial's `q`: under a
# trial's names the UI drew them as step-0 points of the trials' charts and put the positive
# control's Q in the trials' q column. Stores written before keep `q` (read as a fallback).
BASELINE_METRIC_PREFIX = "baseline."
# Q on each paired test-clip resample, per evaluated step (sweeps.record.replicates): a JSON artifact
# of a trial's and a baseline's child run.
Q_REPLICATES_ARTIFACT = "q_replicates.json"

# Trial-table columns that are not MLflow keys of their own.
POINTS_COLUMN = "checkpoint_points"  # {step: {"rankme", "q", "score/<task>", ["q_ci_low", "q_ci_high"]}}
RANKME_BY_STEP_COLUMN = "rankme_by_step"
STATUS_COLUMN = "status"
STOPPED_AT_STEP_COLUMN = "stopped_at_step"
# The pool and N training measured its `rankme` on (the pretraining run's params), beside the
# evaluated R's own `rankme_pool` / `rankme_n` / `rankme_capped` columns.
TRAINING_RANKME_POOL_COLUMN = "training_rankme_pool"
TRAINING_RANKME_N_COLUMN = "training_rankme_n"
RUN_ID_COLUMN = "run_id"
# The colour the MLflow UI draws a run in when it is set (the UI writes it when someone picks one;
# the study analysis pins each trial's figure colour there: sweeps.report.run_colours).
RUN_COLOUR_TAG = "mlflow.runColor"
RUN_COLOUR_COLUMN = "run_colour"
BEST_TRIAL_COLUMN = "marked_best"  # the run carries BEST_TRIAL_TAG now (what a refit moves or keeps)
