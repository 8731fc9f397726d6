"""Test-only fault injection for the pretraining loop, switched on by environment variables.

The driver forwards every `AUDIOSCALE_TEST_*` variable to the Ray Train workers. Nothing here runs
unless a variable is set; users never need them.
- `AUDIOSCALE_TEST_CRASH_AT_STEP=S`, `AUDIOSCALE_TEST_CRASH_RANK=R` (default 1),
  `AUDIOSCALE_TEST_CRASH_MARKER=PATH`: after finishing step S, rank R kills its process once
  (`os._exit`); the marker file makes the restarted worker carry on.
- `AUDIOSCALE_TEST_NAN_AT_STEP=S`: the loss of step S (1-based, every rank) becomes NaN.
- `AUDIOSCALE_TEST_RECORD_CROPS_DIR=DIR`: each rank appends "<step> <hash>" for every crop it trains
  on to `DIR/rank-<r>.txt`, writes its node id to `DIR/node-<r>.txt` and, at the end, a hash of its
  final weights to `DIR/weights-<r>.txt`: to check the data split and that DDP kept ranks equal.
- `AUDIOSCALE_TEST_WAIT_FOR_PREEMPTION_AT_STEP=S`, `AUDIOSCALE_TEST_PREEMPTION_DIR=DIR`: after step
  S each rank writes its node id to `DIR/held-<r>.txt` and waits (up to 300 s) for Ray Train's
  preemption notice, so a test can drain that node before training runs past S; after the
  checkpoint taken for the notice, each rank holds still (up to 300 s) until the node is gone.
"""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Callable
from pathlib import Path

import torch

ENV_PREFIX = "AUDIOSCALE_TEST_"
HOLD_LIMIT_S = 300.0  # a test that never drains the node fails on this instead of hanging


def forwarded_environment() -> dict[str, str]:
    """The test hook variables set in this process, for the workers' runtime environment."""
    return {key: value for key, value in os.environ.items() if key.startswith(ENV_PREFIX)}


def maybe_crash(*, step: int, rank: int) -> None:
    crash_step = os.environ.get(f"{ENV_PREFIX}CRASH_AT_STEP")
    if crash_step is None or int(crash_step) != step:
        return
    if rank != int(os.environ.get(f"{ENV_PREFIX}CRASH_RANK", "1")):
        return
    marker = Path(os.environ[f"{ENV_PREFIX}CRASH_MARKER"])
    if marker.exists():
        return
    marker.write_text(f"crashed rank {rank} after step {step}\n")
    os._exit(1)


def maybe_poison_loss(loss: torch.Tensor, *, step: int) -> torch.Tensor:
    nan_step = os.environ.get(f"{ENV_PREFIX}NAN_AT_STEP")
    if nan_step is not None and int(nan_step) == step:
        return loss * float("nan")
    return loss


def maybe_record_crops(mel: torch.Tensor, *, step: int, rank: int, node_id: str) -> None:
    directory = os.environ.get(f"{ENV_PREFIX}RECORD_CROPS_DIR")
    if not directory:
        return
    Path(directory).mkdir(parents=True, exist_ok=True)
    (Path(directory) / f"node-{rank}.txt").write_text(node_id)
    crops = mel.detach().to("cpu", torch.float32).numpy()  # (batch, frames, n_mels)
    with open(Path(directory) / f"rank-{rank}.txt", "a") as out:
        for crop in crops:
            out.write(f"{step} {hashlib.sha1(crop.tobytes()).hexdigest()}\n")


def maybe_record_weights(model: torch.nn.Module, *, rank: int) -> None:
    directory = os.environ.get(f"{ENV_PREFIX}RECORD_CROPS_DIR")
    if not directory:
        return
    digest = hashlib.sha1()
    for name, tensor in sorted(model.state_dict().items()):
        digest.update(name.encode())
        digest.update(tensor.detach().to("cpu", torch.float32).contiguous().numpy().tobytes())
    (Path(directory) / f"weights-{rank}.txt").write_text(digest.hexdigest())


def maybe_wait_for_preemption(step: int, *, rank: int, node_id: str, noticed: Callable[[], bool]) -> None:
    """`noticed`: `PreemptionNotice.poll`, a collective, so every rank leaves the wait at the same poll."""
    wait_step = os.environ.get(f"{ENV_PREFIX}WAIT_FOR_PREEMPTION_AT_STEP")
    if wait_step is None or int(wait_step) != step:
        return
    directory = Path(os.environ[f"{ENV_PREFIX}PREEMPTION_DIR"])
    directory.mkdir(parents=True, exist_ok=True)
    (directory / f"held-{rank}.txt").write_text(node_id)
    deadline = time.monotonic() + HOLD_LIMIT_S
    while not noticed():
        if time.monotonic() > deadline:
            raise TimeoutError(f"no preemption notice within {HOLD_LIMIT_S} s of step {step}")
        time.sleep(0.5)


def maybe_hold_after_preemption_checkpoint() -> None:
    if os.environ.get(f"{ENV_PREFIX}WAIT_FOR_PREEMPTION_AT_STEP") is not None:
        time.sleep(HOLD_LIMIT_S)  # Ray Train stops this worker at the preemption deadline
