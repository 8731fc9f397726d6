"""Q on each paired test-clip resample, per evaluated step, kept beside a run's metrics.

A deterministic probe's score carries a bootstrap over its test clips whose resamples depend only on
the test split (pipeline.evaluate.probes.bootstrap), so replicate b of any two evaluations on the same
tasks resamples the same clips. Keeping each evaluation's Q replicates lets the report give a
*paired* interval for any difference (a checkpoint against its initialisation, against a baseline):
about half as wide as comparing two unpaired intervals, since the luck of the test split cancels.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from pipeline.tracking import runs as tracking
from sweeps.record.keys import Q_REPLICATES_ARTIFACT

Replicates = dict[int, tuple[float, ...]]  # step -> Q per resample


def write_q_replicates(run: tracking.TrackedRun, replicates: Replicates) -> None:
    """One artifact per run; steps without replicates (a seeded probe) are left out."""
    kept = {str(step): list(values) for step, values in sorted(replicates.items()) if values}
    if kept:
        run.log_dict(kept, Q_REPLICATES_ARTIFACT)


def read_q_replicates(tracking_uri: str, run_id: str) -> Replicates:
    """{step: replicates} of a run; {} when it logged none (a seeded probe, an older study)."""
    if not run_id or Q_REPLICATES_ARTIFACT not in tracking.list_artifacts(tracking_uri, run_id):
        return {}
    with tempfile.TemporaryDirectory(prefix="audioscale-replicates-") as directory:
        path = tracking.download_artifacts(tracking_uri, run_id, Q_REPLICATES_ARTIFACT, Path(directory))
        data = json.loads(Path(path).read_text())
    return {int(step): tuple(float(v) for v in values) for step, values in data.items()}
