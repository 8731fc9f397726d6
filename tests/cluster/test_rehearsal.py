"""The cluster rehearsal (`python -m cluster.rehearsal`): every stage of a cluster user's path against
a real S3-compatible store and a real `mlflow server` (basic-auth, artifacts in the bucket) on
loopback, and cluster/README.md's rehearsal steps kept the same as what it runs."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest

from cluster.rehearsal.documented import documented_commands
from cluster.rehearsal.plan import STAGES, _with_needs, run_rehearsal

README = Path(__file__).resolve().parents[2] / "cluster" / "README.md"


def _joined_shell_lines(text: str) -> str:
    """The README's shell lines with their backslash continuations joined and spaces collapsed."""
    return re.sub(r"[ \t]+", " ", re.sub(r"\\\n\s*", " ", text))


@pytest.mark.parametrize("command", documented_commands(), ids=lambda command: " ".join(command.split()[:3]))
def test_cluster_readme_shows_each_command_the_rehearsal_runs(command):
    assert command in _joined_shell_lines(README.read_text())


def test_a_stage_asked_for_alone_brings_the_stages_it_needs():
    assert _with_needs(("evaluate",)) == ["prep", "exact resume", "evaluate"]
    assert _with_needs(("cut mid-upload",)) == ["prep", "exact resume", "cut mid-upload"]
    assert _with_needs(("faults",)) == ["faults"]
    assert _with_needs(("two-node jobs",)) == ["prep", "two-node jobs"]  # its audio prep is compared with prep's
    with pytest.raises(ValueError, match="no rehearsal stage 'nope'"):
        _with_needs(("nope",))


# The suite's exact-resume test too (its second stage). ~11 min on 2 cores: 6 pretraining and evaluation commands, each starting its own Ray (~4 min), then
# a 4-trial study as two Ray jobs on two nodes (~7 min). It replaces the suite's separate study-job test.
@pytest.mark.slow
@pytest.mark.timeout(3600)
def test_the_rehearsal_runs_every_stage_against_the_bucket_and_the_tracking_server(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # prep's old bug wrote a folder named `s3:` into the working directory
    lines: list[str] = []
    report = run_rehearsal(tmp_path / "work", say=lines.append)
    assert report.failures == {}, "\n".join(lines)
    assert list(report.results) == [name for name, *_ in STAGES]
    prep = report.results["prep"]
    assert prep["part_files"] >= 2 and prep["rows"] >= 24  # 24 files of 6 s, 3 s rows
    assert report.results["exact resume"]["checkpoints"] == [f"checkpoint_step_{step:08d}" for step in (6, 8)]
    truncated = report.results["truncated checkpoint"]
    assert truncated["skipped"].endswith("checkpoint_step_00000008")
    assert truncated["resumed_from"].endswith("checkpoint_step_00000006")
    evaluation = report.results["evaluate"]
    assert 0.0 <= evaluation["Q"] <= 1.0 and math.isfinite(evaluation["R"]) and evaluation["R"] > 1.0
    assert report.results["artifacts"]["artifact_objects"] >= 2  # the encoder and the evaluation files
    assert set(report.results["faults"]) == {"wrong credentials", "missing bucket", "endpoint down", "read-only policy"}
    cut = report.results["cut mid-upload"]
    assert cut["cut_after_s"] > 0 and cut["transfers_cut"] > 0  # the cut landed on a transfer
    assert cut["kept"] == [f"checkpoint_step_{step:08d}" for step in (6, 8)] and "stopped answering" in cut["waited"]
    assert cut["final_loss"] != "none"  # and the stage checked it equals the uninterrupted run's
    assert not (tmp_path / "s3:").exists()
    assert any(f"7/{len(STAGES)} faults: ok" in line for line in lines)  # progress lines name each stage as it ends
    jobs = report.results["two-node jobs"]
    assert jobs["trials"] == 4 and jobs["child_runs"] == 4 and jobs["resumed_from"] > 0
    assert "resubmitted with --resume" in jobs["stopped"] and "worker node" in jobs["killed"]
    assert jobs["prep_audio"].startswith("24 inputs") and jobs["prep_tars"].startswith("24 inputs")
    assert jobs["refused_without_token"] >= 2 and jobs["beyond_loopback"] > 0  # the GCS and the raylet among them
