"""The commands of cluster/README.md "Studies as jobs" are ones the code accepts, and they agree.

The cluster rehearsal runs a study as such a job for real (tests/cluster/test_rehearsal.py, slow); this check is instant and
keeps the documented lines from drifting: every study command parses with `sweeps.scaling`'s own
parser, every `ray job` command talks to the port `ray start` opened, the resubmission is the
same study with `--resume` under a new submission id, and it logs to the `mlflow server` started.
"""

from __future__ import annotations

import shlex
from pathlib import Path

from sweeps.scaling import build_parser

README = Path(__file__).resolve().parents[2] / "cluster" / "README.md"


def section_commands() -> list[list[str]]:
    """The shell commands of the section's fenced blocks, continued lines joined, comments dropped."""
    section = README.read_text().split("\n## Studies as jobs\n", 1)[1].split("\n## ", 1)[0]
    blocks = section.split("```")[1::2]
    lines = "\n".join(block.removeprefix("bash\n") for block in blocks).replace("\\\n", " ").splitlines()
    return [shlex.split(line, comments=True) for line in lines if line.strip()]


def option(words: list[str], name: str) -> str:
    return words[words.index(name) + 1]


def test_study_job_commands_parse_and_agree():
    commands = section_commands()
    (start,) = [c for c in commands if c[:3] == ["ray", "start", "--head"]]
    (server,) = [c for c in commands if c[:3] == ["mlflow", "server", "--host"]]
    address = f"http://127.0.0.1:{option(start, '--dashboard-port')}"
    tracking_uri = f"http://{option(server, '--host')}:{option(server, '--port')}"
    assert "--serve-artifacts" in server  # the figures reach clients through the server

    jobs = [c for c in commands if c[:2] == ["ray", "job"]]
    assert {c[2] for c in jobs} >= {"submit", "status", "logs", "stop"}
    assert all(option(c, "--address") == address for c in jobs)
    submits = [c for c in jobs if c[2] == "submit"]
    assert len(submits) == 2 and option(submits[0], "--submission-id") != option(submits[1], "--submission-id")
    assert all(option(c, "--working-dir") == "." for c in submits)

    studies = []
    for submit in submits:
        entrypoint = submit[submit.index("--") + 1 :]
        assert entrypoint[:3] == ["python", "-m", "sweeps.scaling"], submit
        studies.append(build_parser().parse_args(entrypoint[3:]))
    first, resubmitted = studies
    assert not first.resume and resubmitted.resume
    assert (first.grid, first.study) == (resubmitted.grid, resubmitted.study) == ("mask_ratio", "masks")
    assert first.tracking_uri == resubmitted.tracking_uri == tracking_uri
    stop = next(c for c in jobs if c[2] == "stop")
    assert stop[3] == option(submits[0], "--submission-id")  # the first job is the one stopped
