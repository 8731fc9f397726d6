"""The acceptance run's bookkeeping: progress lines, the time budget, and results saved after every part.

A GPU lease is short and may end mid-run: each measured part (a model's check, a speed run) is written
to `results.json` as soon as it finishes, a part that raises becomes a row naming its error (the rest
still runs), and once the time budget is spent no new part starts, so the lease keeps time for a rerun.
"""

from __future__ import annotations

import json
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path

import torch


class Run:
    def __init__(self, out: Path, *, budget_minutes: float) -> None:
        self.out, self.budget_minutes = out, budget_minutes
        self.began = time.perf_counter()
        self.results: dict = {}

    def say(self, line: str) -> None:
        print(f"[{time.perf_counter() - self.began:6.1f} s] {line}", file=sys.stderr, flush=True)

    def spent(self) -> bool:
        return time.perf_counter() - self.began > 60 * self.budget_minutes

    def save(self) -> None:
        (self.out / "results.json").write_text(json.dumps(self.results, indent=2, default=str) + "\n")

    def part(self, section: str, label: str, measure_one: Callable[[], dict | None], *, keys: dict,
             one_row: bool = False) -> dict:  # fmt: skip
        """`measure_one()`'s row (or one naming its error, or saying the budget was spent), kept under
        `section` (a list of rows, or the row itself when `one_row`) and saved at once."""
        began = time.perf_counter()
        if self.spent():
            row = {**keys, "skipped": f"not run: the {self.budget_minutes:g}-minute budget was spent before it"}
        else:
            row = self._measured(measure_one, keys)
            row["seconds"] = time.perf_counter() - began
        self.say(f"{section}: {label} {_outcome(row)}" + (f" ({row['seconds']:.1f} s)" if "seconds" in row else ""))
        if one_row:
            self.results[section] = row
        else:
            self.results.setdefault(section, []).append(row)
        self.save()
        return row

    @staticmethod
    def _measured(measure_one: Callable[[], dict | None], keys: dict) -> dict:
        try:
            return dict(measure_one() or {})
        except Exception as error:  # noqa: BLE001 - reported in the row, the table and the exit status
            traceback.print_exc()
            return {**keys, "error": f"{type(error).__name__}: {error}"[:400]}
        finally:
            torch._dynamo.reset()  # a fresh compile cache per part: no recompile limit reached across models


def _outcome(row: dict) -> str:
    if "error" in row or "skipped" in row:
        return row.get("error") or row["skipped"]
    if "samples_per_s" in row:
        return f"{row['samples_per_s']:.0f} samples/s"
    return "; ".join(row.get("problems", [])) or "ok"
