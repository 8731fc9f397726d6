"""The laws fitted in a Ray task while the baselines end: the same fits and report as in the driver."""

from __future__ import annotations

import json
from types import SimpleNamespace

import numpy as np
import pytest

from pipeline.evaluate.baselines import CONTROL
from sweeps.laws.forms import SaturatingLaw
from sweeps.record.baseline import BaselineRecord
from sweeps.record.study import StudySettings, read_study
from sweeps.record.trial import TrialRecord
from sweeps.report.study_fits import fit_study_laws
from sweeps.study.baselines import start_baseline_run
from sweeps.study.context import StudyContext
from sweeps.study.fits_beside import fit_laws_while_baselines_finish
from sweeps.study.law_analysis import log_study_analysis
from tests.support.study_runs import start_study_run, start_trial_run

pytestmark = pytest.mark.ray
N_BOOTSTRAP = 30


@pytest.fixture(scope="module")
def study(tmp_path_factory) -> StudyContext:
    """A mask-ratio study of 5 finished trials, written to MLflow as the driver leaves it."""
    root = tmp_path_factory.mktemp("fits_beside")
    uri = f"sqlite:///{root / 'mlflow.db'}"
    parent = start_study_run(uri, "masks")
    parent.log_params(
        StudySettings(name="masks", grid="mask_ratio", profile="cpu_default", probe="knn").params(n_trials=5)
    )
    rng = np.random.default_rng(3)
    for ratio in (0.5, 0.6, 0.7, 0.8, 0.9):
        rankme = 30.0 + 300.0 * ratio**2
        q = float(SaturatingLaw().predict({"q_inf": 0.7, "x_c": 20.0, "alpha": 0.9}, rankme)) + rng.normal(0.0, 0.004)
        child = start_trial_run(uri, parent, "masks", f"mask{ratio:.2f}")
        TrialRecord(
            trial=f"mask{ratio:.2f}", model_name="mae-debug", arch="mae", n_params=144672, hours=3.0, flops=1e12,
            mask_ratio=ratio, rankme=rankme, rankme_by_step={100: rankme * 0.8, 200: rankme}, q=q,
            task_scores={"pitch": q - 0.1}, q_ci_low=q - 0.01, q_ci_high=q + 0.01, rankme_n=600, rankme_pool="pool1",
        ).write(child)  # fmt: skip
        child.finish()
    return StudyContext(study_name="masks", parent_run_id=parent.run_id, tracking_uri=uri,
                        storage_path=str(root / "ray"), corpus_dir="", shards_root="", tasks_dir="")  # fmt: skip


def _measuring(*, finished: bool = False) -> SimpleNamespace:
    """The face of sweeps.study.baselines.BaselinesInProgress this module reads: started, not yet ended."""
    return SimpleNamespace(finished=finished, start=lambda: None)


def _as_json(fits) -> str:
    return json.dumps({name: fit.to_dict() for name, fit in fits.fits.items()}, sort_keys=True, default=str)


def test_the_laws_fitted_in_a_ray_task_are_the_drivers_and_make_the_same_report(ray_local, study):
    said = []
    ahead = fit_laws_while_baselines_finish(_measuring(), study, n_bootstrap=N_BOOTSTRAP, say=said.append)
    assert ahead is not None and ahead.seconds > 0
    assert said == ["fitting the laws on 5 trial(s) (30 bootstrap resamples each) while the baselines end"]
    record = read_study(study.tracking_uri, "masks", run_id=study.parent_run_id)
    here = fit_study_laws(record.trial_table, n_bootstrap=N_BOOTSTRAP, grid="mask_ratio")
    assert "Q(R)" in ahead.fits.fits  # a real fit came back, with its bootstrap intervals
    assert np.isfinite(ahead.fits.fits["Q(R)"].params["q_inf"])
    assert _as_json(ahead.fits) == _as_json(here)  # to the last bit
    assert ahead.table.equals(record.trial_table)
    _, report_ahead = log_study_analysis(record, ahead.table, n_bootstrap=N_BOOTSTRAP, fits=ahead.fits)
    _, report_here = log_study_analysis(record, n_bootstrap=N_BOOTSTRAP)
    assert report_ahead == report_here


def test_a_baseline_run_is_never_read_as_a_trial_even_before_its_record_is_written(study):
    before = read_study(study.tracking_uri, "masks", run_id=study.parent_run_id).trial_table
    record = BaselineRecord(name=CONTROL, q=0.61)
    run = start_baseline_run(record, study, seconds=12.0)  # the measurement ended; its metrics not yet written
    try:
        assert read_study(study.tracking_uri, "masks", run_id=study.parent_run_id).trial_table.equals(before)
    finally:
        record.write(run)
        run.finish_after(12.0)


def test_nothing_is_fitted_ahead_once_the_baselines_have_ended_or_when_no_cpu_is_free(ray_local, study):
    assert fit_laws_while_baselines_finish(_measuring(finished=True), study, n_bootstrap=1, say=print) is None

    @ray_local.remote(num_cpus=2)
    class HoldsEveryCpu:
        def ready(self) -> bool:
            return True

    holder = HoldsEveryCpu.remote()
    ray_local.get(holder.ready.remote())
    try:
        said = []
        assert fit_laws_while_baselines_finish(_measuring(), study, n_bootstrap=1, say=said.append) is None
        assert said == []  # nothing was started that would wait for a CPU
    finally:
        ray_local.kill(holder)
