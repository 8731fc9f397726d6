"""A trial runner for whole-study tests: the real trial (Ray Train pretraining, then R and Q at each
of its checkpoints) cut to SHORT_STEPS steps, on the shards and tasks the study's context names.

Ray workers import it by name (`tests.support.short_real_trials:run_short_real_trial`).
"""

from __future__ import annotations

import dataclasses

from sweeps.study.trainable import run_pretrain_and_evaluate

SHORT_STEPS = 4


def run_short_real_trial(spec, context, run):
    return run_pretrain_and_evaluate(dataclasses.replace(spec, train_steps=SHORT_STEPS), context, run)
