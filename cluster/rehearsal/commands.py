"""Running the user's commands in the rehearsal: each one a subprocess, as a user types it in a shell
with the store's and the tracking server's variables exported, its output kept in a log file and its
outcome (exit code, seconds, the last lines) returned for the checks.
"""

from __future__ import annotations

import dataclasses
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]


@dataclasses.dataclass(frozen=True)
class Outcome:
    argv: tuple[str, ...]
    returncode: int
    seconds: float
    output: str  # stdout and stderr, interleaved as printed
    log_path: Path

    @property
    def shell(self) -> str:
        """The command as a user would type it (`python` for this interpreter)."""
        return shlex.join(["python", *self.argv[1:]] if self.argv[0] == sys.executable else self.argv)

    def last_line(self, containing: str = "") -> str:
        lines = [line for line in self.output.splitlines() if containing in line]
        return lines[-1] if lines else ""


class CommandFailed(RuntimeError):
    pass


@dataclasses.dataclass
class Running:
    """A command started in the background (`start_command`); `finish()` waits and gives its Outcome."""

    process: subprocess.Popen
    argv: list[str]
    log_path: Path
    started: float

    def finish(self, timeout_s: float = 900) -> Outcome:
        self.process.wait(timeout=timeout_s)
        return Outcome(
            argv=tuple(self.argv),
            returncode=self.process.returncode,
            seconds=time.monotonic() - self.started,
            output=self.log_path.read_text(errors="replace"),
            log_path=self.log_path,
        )


def start_command(argv: list[str], *, env: dict[str, str], log_dir: Path, name: str, cwd: Path = REPO_ROOT) -> Running:
    """Start `argv` (a `python -m ...` line: `python` is this interpreter) with `env` over this
    process's environment; the output goes to log_dir/<name>.log."""
    argv = [sys.executable, *argv[1:]] if argv[0] == "python" else argv
    log_path = Path(log_dir) / f"{name}.log"
    with open(log_path, "w") as log:
        process = subprocess.Popen(argv, env={**os.environ, **env}, cwd=cwd, stdout=log, stderr=subprocess.STDOUT)
    return Running(process=process, argv=argv, log_path=log_path, started=time.monotonic())


def run_command(
    argv: list[str], *, env: dict[str, str], log_dir: Path, name: str, cwd: Path = REPO_ROOT, timeout_s: float = 900
) -> Outcome:
    """`start_command`, then wait for it."""
    return start_command(argv, env=env, log_dir=log_dir, name=name, cwd=cwd).finish(timeout_s)


def require_success(outcome: Outcome) -> Outcome:
    if outcome.returncode != 0:
        raise CommandFailed(
            f"`{outcome.shell}` exited with {outcome.returncode} after {outcome.seconds:.0f} s; "
            f"its log is {outcome.log_path}:\n{outcome.output[-3000:]}"
        )
    return outcome
