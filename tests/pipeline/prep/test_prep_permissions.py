"""Inputs this user may not read: a folder is listed as rejected (os.walk used to skip it without a
word) and a file says "permission denied" (libsndfile said "System error." under kind "not audio").

As root the permission bits do not apply, so prep runs with root's capabilities dropped
(setpriv): the same user, without CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH, as any other user."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest
import soundfile

from tests.conftest import REPO_ROOT
from tests.support.prep_helpers import tone


def without_permission_override(command: list[str]) -> list[str]:
    if os.geteuid() != 0:
        return command
    if shutil.which("setpriv") is None:
        pytest.skip("root ignores permission bits and setpriv (util-linux) is not here to drop that")
    return ["setpriv", "--inh-caps=-all", "--bounding-set=-all", *command]


def test_unreadable_folder_and_file_are_rejected_by_name(tmp_path):
    audio = tmp_path / "in"
    for relative in ["ok/a.wav", "ok/b.wav", "locked/c.wav", "no-read.wav"]:
        (audio / relative).parent.mkdir(parents=True, exist_ok=True)
        soundfile.write(audio / relative, tone(3.0), 16_000)
    (audio / "no-read.wav").chmod(0)
    (audio / "locked").chmod(0)
    try:
        done = subprocess.run(
            without_permission_override(
                [sys.executable, "-m", "pipeline.prep", "--input", str(audio), "--output", str(tmp_path / "out")]
            ),
            capture_output=True, text=True, timeout=300, cwd=REPO_ROOT,
            env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
        )  # fmt: skip
    finally:
        (audio / "locked").chmod(0o755)
    assert done.returncode == 0, done.stderr[-3000:]
    rejected = [json.loads(line) for line in (tmp_path / "out" / "rejected.jsonl").read_text().splitlines()]
    by_path = {entry["path"]: entry for entry in rejected}
    assert set(by_path) == {"locked/", "no-read.wav"}, rejected
    assert by_path["locked/"]["kind"] == "unreadable folder" and "Permission denied" in by_path["locked/"]["reason"]
    assert by_path["no-read.wav"]["kind"] == "permission denied" and "chmod" in by_path["no-read.wav"]["reason"]
    summary = done.stdout + done.stderr
    assert "1 unreadable folder, 1 permission denied" in summary
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert manifest["num_rows"] == 2  # the two readable files
    assert manifest["rejected_by_kind"] == {"unreadable folder": 1, "permission denied": 1}
