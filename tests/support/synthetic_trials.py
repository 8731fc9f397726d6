"""A trial runner for driver tests: a closed-form Q(R) instead of pretraining (seconds, not minutes).

Ray workers import it by name (`tests.support.synthetic_trials:run_synthetic_trial`). Every call
appends the trial name to `<storage_path>/executions.txt`; a file `<storage_path>/crash-<trial>`
makes that trial raise, as a crashing pretraining would; a file `<storage_path>/die-once-<trial>` makes
its process exit at once, as on a node that is lost, and is removed so that Tune's rerun succeeds. A file `<storage_path>/hold-seconds`
makes every trial take that long, and each then appends "name start end cores_per_trial" to
`<storage_path>/intervals.txt` (for the concurrency test).
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from sweeps.laws.forms import SaturatingLaw
from sweeps.record.rankme_pool import RankMePoolRecord
from sweeps.record.trial import TrialRecord

TRUE_Q_OF_R = {"q_inf": 0.7, "x_c": 15.0, "alpha": 0.8}


def run_synthetic_trial(spec, context, run) -> TrialRecord:
    storage = Path(context.storage_path)
    storage.mkdir(parents=True, exist_ok=True)
    with open(storage / "executions.txt", "a") as ledger:
        ledger.write(spec.name + "\n")
    if (storage / f"crash-{spec.name}").exists():
        raise RuntimeError(f"synthetic crash of {spec.name}")
    die = storage / f"die-once-{spec.name}"
    if die.exists():
        die.unlink()
        os._exit(1)  # no exception, no clean-up: the trial's process is simply gone
    hold = storage / "hold-seconds"
    if hold.exists():
        started = time.time()
        time.sleep(float(hold.read_text()))
        with open(storage / "intervals.txt", "a") as intervals:
            intervals.write(f"{spec.name} {started} {time.time()} {context.cores_per_trial}\n")
    ratio = float(spec.mask_ratio)
    rankme = 40.0 + 400.0 * ratio**2
    q = float(SaturatingLaw().predict(TRUE_Q_OF_R, rankme))
    return TrialRecord(
        trial=spec.name, model_name=spec.model_name, arch=spec.arch, n_params=1000, hours=3.0, flops=1e12,
        mask_ratio=ratio, rankme=rankme, rankme_by_step={10: 0.6 * rankme, spec.train_steps: rankme}, q=q,
        task_scores={"synthetic": q}, pool=synthetic_pool(context), configuration=spec.configuration,
    )  # fmt: skip


def synthetic_pool(context) -> RankMePoolRecord:
    """The pool every synthetic trial reports, as a real trial reports pretraining's (the study records it)."""
    return RankMePoolRecord(shards_dir=context.shards_root, crop_frames=1024, n=600, fingerprint="synthetic0000000")
