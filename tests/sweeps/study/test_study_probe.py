"""`python -m sweeps.scaling --probe`: the study's probe reaches its trials and is recorded on its run."""

from __future__ import annotations

import pytest

from pipeline.tracking import runs as tracking
from sweeps.scaling import main, parse_study_args
from sweeps.study.config import StudyConfig, StudyEvaluation
from sweeps.study.driver import _open_study


@pytest.mark.parametrize("probe", ["hear", "appc", "quick", "linear", "knn"])
def test_cli_accepts_every_probe(probe):
    config, _ = parse_study_args(["--grid", "mask_ratio", "--probe", probe])
    assert config.evaluate.probe == probe and config.resolved_probe == probe


def test_cli_refuses_an_unknown_probe(capsys):
    with pytest.raises(SystemExit):
        main(["--grid", "mask_ratio", "--probe", "svm"])
    assert "invalid choice" in capsys.readouterr().err


def test_default_probe_is_the_profiles():
    default, _ = parse_study_args(["--grid", "mask_ratio"])
    assert default.evaluate.probe is None and default.resolved_probe == "knn"
    assert StudyConfig(grid="size", profile="paper").resolved_probe == "appc"  # paper App. C


def test_probe_reaches_the_trials_and_is_recorded_and_kept_on_resume(tracking_uri):
    study = {"grid": "mask_ratio", "study_name": "probes", "tracking_uri": tracking_uri}
    parent, context = _open_study(StudyConfig(**study, evaluate=StudyEvaluation(probe="knn")), n_trials=5)
    parent.finish()
    assert context.probe == "knn"
    assert tracking.read_run(tracking_uri, parent.run_id)["params"]["probe"] == "knn"
    # Q compares only within one probe: a resume must keep the study's.
    with pytest.raises(ValueError, match="resume it with --probe knn"):
        _open_study(StudyConfig(**study, evaluate=StudyEvaluation(probe="linear"), resume=True), n_trials=5)
    parent, context = _open_study(StudyConfig(**study, evaluate=StudyEvaluation(probe="knn"), resume=True), n_trials=5)
    parent.finish()
    assert context.probe == "knn"
