"""The MLflow names the pipeline's stages write, defined once so the studies read exactly what was written.

Pretraining and evaluation log these into their runs; `sweeps.record` (the study's record) reads
them back from a study's child runs. They live here, below both, because the writer owns the name:
a study that spelled them itself would silently stop matching when a stage renamed one. No mlflow
import here: naming a key needs no client.
"""

from __future__ import annotations

# Metrics, one name per quantity.
Q_METRIC = "q"  # quality: the mean of the task scores the probe reached
RANKME_METRIC = "rankme"  # RankMe on the RankMe pool (pipeline.rankme.model_rankme): the R of Q(R)
TASK_RANKME_METRIC = "task_rankme"  # the evaluation's diagnostic RankMe on task audio, never R
LEGACY_EVAL_RANKME_METRIC = "eval_rankme"  # the checkpoint's R under its pre-"one name per quantity" name
EVAL_Q_METRIC = "eval_q"  # evaluation's Q, logged on the pretraining run beside its curves
EVAL_RANKME_N_METRIC = "eval_rankme_n"  # N behind the evaluated checkpoint's R

# What makes a RankMe value comparable (pipeline.rankme.model_rankme.PoolRankMe.record): the same
# names are params on a pretraining run and params or metrics on an evaluation run.
RANKME_N_KEY = "rankme_n"
RANKME_K_KEY = "rankme_k"
RANKME_POOL_KEY = "rankme_pool"  # the pool's fingerprint
RANKME_CAPPED_KEY = "rankme_capped"  # N < 8 K: limited by N
EVAL_RANKME_POOL_TAG = "eval_rankme_pool"
EVAL_RANKME_CAPPED_TAG = "eval_rankme_capped"

# How a checkpoint was read when its Q was measured: the readout of its running statistics
# (pipeline.evaluate.readout_calibration.Readout) and its input normalisation
# (pipeline.evaluate.embeddings.MelNormalisation.record). Fields of an evaluation result, params of
# its run and of a study trial's: a Q compares only with one read the same way.
READOUT_AND_INPUT_KEYS = (
    "readout_stats",
    "readout_calibration_pool",
    "readout_calibration_crops",
    "input_normalisation",
    "input_stats_from",
    "input_stats_sha256",
)

# Pretraining's params that re-derive its RankMe pool (pipeline.pretrain.data.rankme_pool).
SHARDS_DIR_PARAM = "shards_dir"
RANKME_SHARDS_DIR_PARAM = "rankme_shards_dir"
CROP_FRAMES_PARAM = "crop_frames"
TRAIN_STEPS_PARAM = "train_steps"  # the planned horizon: early prediction compares trials at fractions of it

# Pretraining's validation verdict (a tag; a study may also log it as a param or metric): the
# validation loss had stopped falling (paper Fig. 1b fits Q(R) on converged checkpoints only).
CONVERGED_KEY = "converged"

# MLflow params never change: a resumed run that logs another value keeps it as this tag prefix + key.
RESUMED_PARAM_PREFIX = "resumed_param."

# What a task score's (and Q's) 95% interval resamples (pipeline.evaluate.run's `interval_over`).
INTERVAL_OVER_SEEDS = "probe seeds"
INTERVAL_OVER_TEST_CLIPS = "test clips"  # the deterministic linear / kNN probes: a bootstrap over test clips
