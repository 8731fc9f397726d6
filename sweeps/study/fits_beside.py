"""The study's laws, fitted in a Ray task while its baselines finish in the driver.

The positive control's 4,000 steps outlast the last trial by about two minutes on 2 cores, with one
core idle (sweeps.study.baselines); the fits need only the trials, so they run on that core then
(docs/performance.md). Not in a driver thread: the fits and the control's training are both
Python-heavy, and the control, whose end the study waits for, would wait for the GIL instead. The
task computes exactly what the driver would (`fit_study_laws` on the same table, its local fits
on one BLAS thread either way); the report, which needs the baselines, is written after them.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import pandas as pd
import ray

from sweeps.record.study import read_study
from sweeps.report.study_fits import StudyFits, fit_study_laws
from sweeps.study.baselines import BaselinesInProgress
from sweeps.study.context import StudyContext
from sweeps.study.law_analysis import study_info


@dataclass(frozen=True)
class LawsFittedAhead:
    """The trial table the laws were fitted on, and the fits: the report is written from both."""

    table: pd.DataFrame
    fits: StudyFits
    seconds: float  # the fitting's wall time, beside the baselines


def fit_laws_while_baselines_finish(
    baselines: BaselinesInProgress, context: StudyContext, *, n_bootstrap: int, say
) -> LawsFittedAhead | None:
    """The laws fitted on the finished trials in a Ray task (one CPU) while the baselines are measured;
    None when the baselines have already finished, no CPU is free or the task failed: the driver then
    fits them itself after the baselines, as without any (an error in the fit itself raises there)."""
    baselines.start()  # started with the last trial; if not (a restored driver), now, before the fits
    # A cluster with no CPU free now (a busy one, a head node that runs nothing) would hold the task back.
    if baselines.finished or ray.available_resources().get("CPU", 0.0) < 1:
        return None
    study = read_study(context.tracking_uri, context.study_name, run_id=context.parent_run_id)
    table = study.trial_table
    say(f"fitting the laws on {len(table)} trial(s) ({n_bootstrap} bootstrap resamples each) while the baselines end")
    grid = study_info(study.settings).grid or None
    started = time.monotonic()
    fitting = ray.remote(num_cpus=1, max_retries=0)(fit_study_laws).remote(table, n_bootstrap=n_bootstrap, grid=grid)
    try:
        fits = ray.get(fitting)
    except Exception as error:  # the task's process lost (memory, a node): the driver fits them after the baselines
        say(f"fitting the laws beside the baselines failed ({type(error).__name__}); fitting them after them")
        return None
    return LawsFittedAhead(table=table, fits=fits, seconds=time.monotonic() - started)
