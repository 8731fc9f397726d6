"""Progress of a long embedding pass, by the clock: what runs, how far it is, how long is left.

An outside model may take seconds per call (a large HEAR module on a CPU), and scoring it embeds
the RankMe pool and every task clip before the first task's score can be printed: at 2 s a call
that was ~11 minutes without a line. Lines counted in calls or clips would come too rarely for a
slow model and too often for a fast one, so they are due by time instead: one as the pass starts,
the first count after `FIRST_LINE_AFTER_S`, then one every `EVERY_S`, each checked when a call
returns (a single call longer than that delays its line by the call's length, never more).
"""

from __future__ import annotations

import time
from collections.abc import Callable

FIRST_LINE_AFTER_S = 10.0  # soon enough that a person sees it moving, late enough to estimate a rate
EVERY_S = 60.0


class EmbeddingProgress:
    """Counts embedded sounds against `total` and hands a line to `say` when one is due."""

    def __init__(
        self,
        say: Callable[[str], None],
        *,
        subject: str,
        total: int,
        detail: str = "",
        first_after_s: float = FIRST_LINE_AFTER_S,
        every_s: float = EVERY_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.say, self.subject, self.total, self.every_s, self.clock = say, subject, total, every_s, clock
        self.started = clock()
        self.due = self.started + first_after_s
        self.done = 0
        self.stage = ""
        say(
            f"[evaluate] {subject}: embedding {total:,} sounds{f' ({detail})' if detail else ''}; the first count "
            f"in {first_after_s:g} s, then every {_duration(every_s)}"
        )

    def begin(self, stage: str) -> None:
        """Name what is embedded now ("the RankMe pool", "task tones (train)")."""
        self.stage = stage

    def advance(self, sounds: int) -> None:
        """`sounds` more were embedded; say so when a line is due."""
        self.done += sounds
        now = self.clock()
        if now < self.due:
            return
        self.due = now + self.every_s
        elapsed = now - self.started
        left = elapsed / self.done * (self.total - self.done) if self.done else float("nan")
        self.say(
            f"[evaluate] {self.subject}: {self.stage}: {self.done:,} of {self.total:,} sounds "
            f"({100 * self.done / max(self.total, 1):.0f}%) in {_duration(elapsed)}, about {_duration(left)} "
            f"of embedding left ({self.done / max(elapsed, 1e-9):.1f} sounds/s)"
        )


def _duration(seconds: float) -> str:
    if seconds != seconds:  # NaN: nothing measured yet
        return "an unknown time"
    if seconds < 90:
        return f"{seconds:.0f} s"
    minutes = seconds / 60
    return f"{minutes:.0f} min" if minutes < 90 else f"{minutes / 60:.1f} h"
