"""Where the training stream stood at a checkpoint, and where a resumed run starts reading.

A checkpoint records (epoch, offset, world size) next to the optimizer state. Resuming with the same
number of workers starts every worker exactly there, so the resumed run trains on the crops an
uninterrupted run would have (tests/pipeline/pretrain/test_pretrain_exact_resume.py). The record is checked
against the position the step implies (every step takes world-size-independent `crops_per_step`
crops per worker), which catches a checkpoint written with another batch size.
Checkpoints older than the record, or a resume with another number of workers (the per-worker ranges
change), start from the implied position instead and say so: the same epoch and share of it, not the
same crops.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pipeline.shards.crop_stream import StreamPosition


def position_record(position: StreamPosition, *, world_size: int) -> dict[str, int]:
    """What `save_train_state(data_position=...)` stores."""
    return {"epoch": position.epoch, "offset": position.offset, "world_size": world_size}


def implied_position(step: int, *, crops_per_step: int, rows_per_epoch: int) -> StreamPosition:
    """The position after `step` steps of `crops_per_step` crops per worker, from the start."""
    return StreamPosition().advanced(step * crops_per_step, rows_per_epoch)


def resume_position(
    saved: dict[str, Any] | None,
    *,
    step: int,
    world_size: int,
    crops_per_step: int,
    rows_per_epoch: int,
    say: Callable[[str], None] = print,
) -> StreamPosition:
    """The position a run resumed at `step` starts reading from (see the module docstring)."""
    implied = implied_position(step, crops_per_step=crops_per_step, rows_per_epoch=rows_per_epoch)
    if saved is None:
        if step:
            say(
                f"resume: the checkpoint of step {step} has no data position (written by an older version); "
                f"starting at epoch {implied.epoch}, crop {implied.offset}, where the step count puts it"
            )
        return implied
    if int(saved["world_size"]) != world_size:
        say(
            f"resume: the checkpoint was written by {saved['world_size']} worker(s), this run has {world_size}: "
            f"each worker's share of an epoch changes, so the data continues at epoch {implied.epoch}, crop "
            f"{implied.offset} of the new shares, not with the crops the old run would have seen"
        )
        return implied
    recorded = StreamPosition(int(saved["epoch"]), int(saved["offset"]))
    if recorded != implied:
        say(
            f"resume: the checkpoint's data position {recorded} differs from the {implied} that {step} steps of "
            f"{crops_per_step} crops per worker imply (the batch size changed?); continuing from the recorded one"
        )
    return recorded
