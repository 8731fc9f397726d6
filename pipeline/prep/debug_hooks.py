"""Test-only fault injection for prep, switched on by an environment variable; users never need it.

- `AUDIOSCALE_TEST_PREP_KILL_AFTER_BATCHES=N`: once N batch records have reached the driver, it sends
  itself SIGKILL, as a lost driver or node would end it: no cleanup, no handler, the tasks left running.
  The next run continues from the records (`pipeline.prep.progress`).
"""

from __future__ import annotations

import os
import signal

KILL_AFTER_BATCHES = "AUDIOSCALE_TEST_PREP_KILL_AFTER_BATCHES"


def maybe_kill_driver(batches_recorded: int) -> None:
    limit = os.environ.get(KILL_AFTER_BATCHES)
    if limit is not None and batches_recorded >= int(limit):
        os.kill(os.getpid(), signal.SIGKILL)
