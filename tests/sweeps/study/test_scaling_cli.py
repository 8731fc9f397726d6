"""`python -m sweeps.scaling` refuses bad requests before starting anything."""

from __future__ import annotations

from pipeline.tracking import runs as tracking
from sweeps.record.keys import STUDY_EXPERIMENT
from sweeps.scaling import main


def test_unknown_grid_exits_2_naming_the_choices(capsys, tracking_uri):
    assert main(["--grid", "depth", "--tracking-uri", tracking_uri]) == 2
    assert "unknown grid 'depth'" in capsys.readouterr().err


def test_existing_study_needs_resume(capsys, tracking_uri):
    tracking.start_or_resume_run(tracking_uri=tracking_uri, experiment_name=STUDY_EXPERIMENT, run_name="masks")
    assert main(["--grid", "mask_ratio", "--study", "masks", "--tracking-uri", tracking_uri]) == 2
    assert "pass --resume" in capsys.readouterr().err
