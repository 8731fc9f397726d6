"""Studies written straight to MLflow, as the driver leaves them: a study run and its trials' child runs.

For the tests of what reads a finished study (refits, the advisor) without running one on Ray Tune.
"""

from __future__ import annotations

from pipeline.tracking import runs as tracking
from sweeps.record.keys import STUDY_EXPERIMENT, child_run_name


def start_study_run(tracking_uri: str, study_name: str) -> tracking.TrackedRun:
    return tracking.start_or_resume_run(
        tracking_uri=tracking_uri, experiment_name=STUDY_EXPERIMENT, run_name=study_name
    )


def start_trial_run(tracking_uri: str, study: tracking.TrackedRun, study_name: str, trial: str) -> tracking.TrackedRun:
    """The child run of `trial`, named as the driver names it (`<trial>@<study>`)."""
    return tracking.start_or_resume_run(
        tracking_uri=tracking_uri,
        experiment_name=STUDY_EXPERIMENT,
        run_name=child_run_name(study_name, trial),
        parent_run_id=study.run_id,
    )
