"""Where a study's wall time went, phase by phase, printed after its closing lines so that a person
sees what the run cost and where (the install, measured by scripts/main.sh, comes in through
AUDIOSCALE_INSTALL_SECONDS).

Phases in the order a study runs them: start-up (inputs checked, the study run opened, Ray
started), defaults (the embedded corpus, tasks and shards, built once), baselines, trials, fits (the
laws, figures and report), report. A phase that did not run this time is left out. The baselines
run beside the trials (sweeps.study.baselines): their minutes are printed with what they ran beside
and are not added to the total, which is the wall time. When the laws are fitted while the
baselines end (sweeps.study.fits_beside), "fits" is printed beside the baselines and the figures
and report written after them are "report".
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field

INSTALL_SECONDS_ENV = "AUDIOSCALE_INSTALL_SECONDS"
PHASES = ("install", "start-up", "defaults", "baselines", "trials", "fits", "report")


@dataclass
class PhaseClock:
    """Wall seconds per phase; `begin(name)` ends the phase before it."""

    seconds: dict[str, float] = field(default_factory=dict)
    beside: dict[str, str] = field(default_factory=dict)  # a phase run beside another -> that phase
    _current: str | None = None
    _since: float = 0.0

    def begin(self, phase: str) -> None:
        self.end()
        self._current, self._since = phase, time.monotonic()

    def end(self) -> None:
        if self._current is not None:
            self.seconds[self._current] = self.seconds.get(self._current, 0.0) + time.monotonic() - self._since
            self._current = None

    def record_beside(self, phase: str, seconds: float, *, beside: str) -> None:
        """`phase` took `seconds`, in parallel with `beside` (inside its wall time, not after it)."""
        self.seconds[phase] = self.seconds.get(phase, 0.0) + seconds
        self.beside[phase] = beside


def install_seconds() -> float | None:
    """The install's seconds as scripts/main.sh measured them, when this study was started by it."""
    value = os.environ.get(INSTALL_SECONDS_ENV, "")
    try:
        return float(value) if value else None
    except ValueError:
        return None


def phase_line(seconds: dict[str, float], install: float | None = None, beside: dict[str, str] | None = None) -> str:
    """'time: install 3.4 min, start-up 0.2 min, ..., total 23.1 min' (minutes, one decimal); a phase
    run beside another reads 'baselines 3.9 min beside the trials' and is not added to the total."""
    beside = beside or {}
    measured = {**({"install": install} if install is not None else {}), **seconds}
    parts = [
        f"{phase} {measured[phase] / 60:.1f} min" + (f" beside the {beside[phase]}" if phase in beside else "")
        for phase in PHASES
        if phase in measured
    ]
    total = sum(value for phase, value in measured.items() if phase not in beside)
    return f"time: {', '.join(parts)}; total {total / 60:.1f} min"
