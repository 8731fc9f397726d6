"""A prep killed part-way continues when run again: the batches it finished are kept and not redone, the
parts a killed task left half-made are not, and the result equals an uninterrupted prep byte for byte.
Before, a folder with parts and no manifest was cleared and every file featurized again."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline.prep import progress
from pipeline.prep.debug_hooks import BATCH_DELAY_S, KILL_AFTER_BATCHES
from pipeline.prep.output import prepare_output_dir
from pipeline.prep.run import PrepConfig, run_prep
from pipeline.shards.format import read_manifest, read_shard_table
from pipeline.shards.location import locate_shards
from tests.conftest import REPO_ROOT
from tests.support.prep_helpers import write_clips

pytestmark = pytest.mark.ray
FILES = 24  # 2 CPUs -> 8 batches of 3 files


def _killed_prep(audio: Path, output: Path, after_batches: int) -> str:
    """`python -m pipeline.prep` SIGKILLed by itself once `after_batches` batch records reached it; the
    Ray processes it started are ended with it (its process group)."""
    env = {**os.environ, KILL_AFTER_BATCHES: str(after_batches), BATCH_DELAY_S: "0.5"}
    argv = [sys.executable, "-m", "pipeline.prep", "--input", str(audio), "--output", str(output), "--segment-s", "2",
            "--no-progress"]  # fmt: skip
    process = subprocess.Popen(argv, env=env, cwd=REPO_ROOT, start_new_session=True, text=True,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT)  # fmt: skip
    output_text, _ = process.communicate(timeout=300)
    assert process.returncode == -signal.SIGKILL, output_text[-3000:]
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    return output_text


def test_a_prep_killed_at_half_continues_and_equals_an_uninterrupted_one(ray_local, tmp_path, capfd):
    audio = write_clips(tmp_path / "audio", FILES)
    output = tmp_path / "resumed"
    _killed_prep(audio, output, after_batches=4)
    assert not (output / "manifest.json").exists()
    location = locate_shards(output)
    recorded = progress.finished_records(location)
    assert 4 <= len(recorded) < 8, sorted(recorded)
    kept = {
        record["part"]["name"]: (output / record["part"]["name"]).stat().st_mtime_ns for record in recorded.values()
    }
    (output / progress.part_name(999)).write_bytes(b"half a part from a killed task")  # no record: removed

    resumed = run_prep(PrepConfig(input_path=audio, output_dir=output, segment_s=2.0, show_progress=False))
    said = capfd.readouterr().err
    # A task the kill left running may still have recorded its batch before the killed Ray went down.
    done = int(re.search(r"continuing a run that was cut short: (\d+) of 8 batches were done", said).group(1))
    assert len(recorded) <= done < 8, said
    assert {name: (output / name).stat().st_mtime_ns for name in kept} == kept  # not written again
    assert not (output / progress.part_name(999)).exists() and not (output / progress.PROGRESS_DIR).exists()

    whole = run_prep(PrepConfig(input_path=audio, output_dir=tmp_path / "whole", segment_s=2.0, show_progress=False))
    assert resumed.manifest["part_files"] == whole.manifest["part_files"]  # names, rows, bytes, sha256
    for key in ("fingerprint", "num_inputs", "num_rows", "total_hours", "mean", "std", "rejected_by_kind"):
        assert resumed.manifest[key] == whole.manifest[key], key
    assert read_shard_table(output).equals(read_shard_table(tmp_path / "whole"))
    assert read_manifest(output)["num_inputs"] == FILES


def test_a_cut_short_run_with_other_settings_is_cleared_not_continued(tmp_path):
    location = locate_shards(tmp_path)
    progress.start_plan(location, {"fingerprint": "old", "num_items": 3, "batch_items": 1})
    (tmp_path / progress.part_name(0)).write_bytes(b"rows of the old settings")
    assert prepare_output_dir(tmp_path, fingerprint="new", settings={}, overwrite=False) is False
    assert list(tmp_path.iterdir()) == []
    progress.start_plan(location, {"fingerprint": "same", "num_items": 3, "batch_items": 1})
    (tmp_path / progress.part_name(0)).write_bytes(b"rows of this run")
    assert prepare_output_dir(tmp_path, fingerprint="same", settings={}, overwrite=False) is False
    assert (tmp_path / progress.part_name(0)).exists()  # kept for the run to continue
