"""Test-only fault injection for prep, switched on by an environment variable; users never need it.

- `AUDIOSCALE_TEST_PREP_KILL_AFTER_BATCHES=N`: once N batch records have reached the driver, it sends
  itself SIGKILL, as a lost driver or node would end it: no cleanup, no handler, the tasks left running.
  The next run continues from the records (`pipeline.prep.progress`).
- `AUDIOSCALE_TEST_PREP_BATCH_DELAY_S=S`: each batch task waits S seconds before its work, as a batch of
  long files would take, so that a kill after N records surely finds batches still to do (tiny test
  clips are featurized faster than the driver reads the records of the first).
"""

from __future__ import annotations

import os
import signal
import time

KILL_AFTER_BATCHES = "AUDIOSCALE_TEST_PREP_KILL_AFTER_BATCHES"
BATCH_DELAY_S = "AUDIOSCALE_TEST_PREP_BATCH_DELAY_S"


def maybe_kill_driver(batches_recorded: int) -> None:
    limit = os.environ.get(KILL_AFTER_BATCHES)
    if limit is not None and batches_recorded >= int(limit):
        os.kill(os.getpid(), signal.SIGKILL)


def maybe_delay_batch() -> None:
    delay = os.environ.get(BATCH_DELAY_S)
    if delay is not None:
        time.sleep(float(delay))
