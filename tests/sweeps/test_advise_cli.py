"""`python -m sweeps.advise` on a study in MLflow: the answer printed and logged, a refusal in one line."""

from __future__ import annotations

import numpy as np
import pytest

from pipeline.cli.errors import run_cli
from pipeline.tracking import runs as tracking
from sweeps.advise import main
from sweeps.laws.forms import ChinchillaLaw
from sweeps.laws.known_law_study import synthetic_study
from sweeps.record.trial import TrialRecord
from tests.support.study_runs import start_study_run, start_trial_run

LOSS_LAW = {"E": 0.4, "A": 30.0, "alpha": 0.3, "B": 0.5, "beta": 0.35}


@pytest.fixture(scope="module")
def size_data_study(tmp_path_factory):
    """A 4 x 4 size x data-volume study of one seed, written as trial runs (SQLite runs are slow: once)."""
    uri = f"sqlite:///{tmp_path_factory.mktemp('advise') / 'mlflow.db'}"
    table = synthetic_study(3, seeds=1)
    table = table[table["n_params"].isin(sorted(table["n_params"].unique())[1:]) & (table["hours"] > 1.0)]
    parent = start_study_run(uri, "sizes")
    for row in table.itertuples():
        child = start_trial_run(uri, parent, "sizes", row.trial)
        TrialRecord(
            trial=row.trial, model_name="mae-debug", arch="mae", n_params=int(row.n_params), hours=row.hours,
            flops=row.flops, mask_ratio=0.75, rankme=10.0, rankme_by_step={100: 10.0}, q=row.q,
        ).write(child)  # fmt: skip
        child.log_params({"training_flops_per_sample": row.training_flops_per_sample})  # as pretraining logs it
        loss = float(ChinchillaLaw().predict(LOSS_LAW, row.n_params, row.hours))
        child.log_metrics({"loss": 2.0 * loss}, step=1)
        child.log_metrics({"loss": loss}, step=300)  # the last logged loss is the one the law takes
        child.finish()
    parent.finish()
    return uri, parent.run_id, float(table["flops"].max())


def test_the_advice_is_printed_and_lands_on_the_study_run(size_data_study, capsys):
    uri, run_id, largest = size_data_study
    argv = ["--study", "sizes", "--budget", f"{3 * largest}", "--holdout", "largest", "--n-bootstrap", "20",
            "--tracking-uri", uri, "--gpu", "h100", "--mfu", "0.4", "--gpus", "8"]  # fmt: skip
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert (
        printed.startswith("budget ") and "model size N: " in printed and "held-out check: refitted without" in printed
    )
    assert "GPU-hours on h100 at 40% MFU" in printed
    assert "the training-loss law L(N,D) at the same budget: N " in printed
    run = tracking.read_run(uri, run_id)
    n_opt = run["metrics"]["advise.n_opt"][-1][1]
    assert run["metrics"]["advise.n_opt_ci_low"][-1][1] <= n_opt <= run["metrics"]["advise.n_opt_ci_high"][-1][1]
    assert np.isclose(run["metrics"]["advise.extrapolation"][-1][1], 3.0)
    artifacts = tracking.list_artifacts(uri, run_id, "advise")
    assert any(name.endswith(".png") for name in artifacts) and any(name.endswith(".txt") for name in artifacts)


def test_gpu_hours_become_flops_and_a_refusal_is_one_line(size_data_study, capsys):
    uri, run_id, largest = size_data_study
    # 1e6 GPU-hours of an H100 at 40%: 1.4e24 FLOPs, far beyond 100x this tiny study.
    code = run_cli(main, "sweeps.advise", ["--study", "sizes", "--gpu-hours", "1e6", "--tracking-uri", uri])
    error = capsys.readouterr().err
    assert code == 2 and "no advice: the budget 1.42e+24 FLOPs is" in error and "at most 100x" in error
    assert "Traceback" not in error
    assert "at most 100x" in tracking.read_run(uri, run_id)["tags"]["advise.refused"]


@pytest.mark.parametrize("flag", ["--budget", "--gpu-hours"])
def test_a_negative_budget_is_read_and_refused_naming_the_flag(flag, tmp_path, capsys):
    """argparse took `-1e20` for a flag (`expected one argument`); the value now reaches its check."""
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    code = run_cli(main, "sweeps.advise", ["--study", "s", flag, "-1e20", "--tracking-uri", uri])
    error = capsys.readouterr().err
    assert code == 2 and f"{flag} -1e+20: the budget must be a positive, finite number" in error, error
    assert error.count("\n") == 1 and "expected one argument" not in error
