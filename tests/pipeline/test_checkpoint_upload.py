"""Checkpoints copied to storage while training goes on, and the checkpoint at a preemption notice.

An asynchronous upload that a node's loss cuts short leaves a partly copied folder in storage; a
resume must never pick it. Ray Train registers a checkpoint only after its whole copy, but the
resume also scans the run's folders (pipeline.pretrain.resume), so every partial state must fail
`verify_checkpoint`. The end-to-end preemption run is test_pretrain_preemption.py (slow).
"""

from __future__ import annotations

import itertools
import shutil
from types import SimpleNamespace

import pyarrow.fs as pafs
import pytest
import torch
from torch import nn

from pipeline import checkpoint
from pipeline.pretrain.config import PretrainConfig
from pipeline.pretrain.preemption import PreemptionNotice
from pipeline.pretrain.resume import newest_verified_checkpoint, resume_directory

FILES = (checkpoint.META_FILE, checkpoint.WEIGHTS_FILE, checkpoint.TRAIN_STATE_FILE)


def _write_checkpoint(directory, step: int) -> None:
    """A real checkpoint folder, as the loop writes it (weights, then train state)."""
    torch.manual_seed(step)
    model = nn.Sequential(nn.Linear(8, 32), nn.LayerNorm(32), nn.Linear(32, 8))
    optimizer = torch.optim.AdamW(model.parameters())
    model(torch.randn(4, 8)).pow(2).mean().backward()
    optimizer.step()
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda _: 1.0)
    checkpoint.save_model_checkpoint(directory, model, model_name="toy", overrides={}, step=step, shard_fingerprint="f")
    checkpoint.save_train_state(directory, optimizer=optimizer, scheduler=scheduler, step=step)


def _partial_copies():
    """(files copied whole, file copied half or None): every state a copy can stop in, file by file."""
    for count in range(len(FILES) + 1):
        for whole in itertools.combinations(FILES, count):
            rest = [name for name in FILES if name not in whole]
            for half in [None, *rest]:
                if len(whole) < len(FILES):
                    yield whole, half


@pytest.mark.parametrize(("whole", "half"), list(_partial_copies()))
def test_a_partly_uploaded_checkpoint_is_never_resumed_from(tmp_path, whole, half):
    local, run = tmp_path / "local", tmp_path / "storage" / "run"
    _write_checkpoint(run / "checkpoint_step_00000004", step=4)
    _write_checkpoint(local, step=8)
    partial = run / "checkpoint_step_00000008"
    partial.mkdir()
    for name in whole:
        shutil.copyfile(local / name, partial / name)
    if half is not None:
        data = (local / half).read_bytes()
        (partial / half).write_bytes(data[: len(data) // 2])
    chosen, skipped = newest_verified_checkpoint([run / "checkpoint_step_00000004", partial])
    assert chosen == run / "checkpoint_step_00000004"
    assert [path for path, _ in skipped] == [partial]
    # What a restarted worker does with Ray's latest registered checkpoint (the step 4 one).
    said = []
    latest = SimpleNamespace(path=str(run / "checkpoint_step_00000004"), filesystem=pafs.LocalFileSystem())
    with resume_directory(latest, say=said.append) as directory:
        assert checkpoint.read_checkpoint_meta(directory)["step"] == 4
    assert said and "checkpoint_step_00000008" in said[0]


def test_a_whole_upload_is_resumed_from(tmp_path):
    run = tmp_path / "run"
    _write_checkpoint(run / "checkpoint_step_00000004", step=4)
    _write_checkpoint(tmp_path / "local", step=8)
    (run / "checkpoint_step_00000008").mkdir()  # as Ray Train's StorageContext copies: create_dir, copy_files
    pafs.copy_files(str(tmp_path / "local"), str(run / "checkpoint_step_00000008"))
    chosen, skipped = newest_verified_checkpoint(sorted(run.iterdir()))
    assert chosen == run / "checkpoint_step_00000008" and skipped == []


def test_a_preemption_notice_asks_for_one_checkpoint():
    notices = iter([None, None, {"deadline_ms": 1}])  # what get_preemption_info returns, poll by poll
    reads = []

    def read_notice():
        reads.append(1)
        return next(notices)

    notice = PreemptionNotice(read_notice, every_steps=3)
    due = [notice.checkpoint_due(step) for step in range(1, 13)]
    assert due == [False] * 8 + [True] + [False] * 3  # polled at steps 3, 6, 9: noticed at 9
    assert len(reads) == 3  # only at the poll steps, and not again once noticed
    assert notice.info == {"deadline_ms": 1}


def test_a_notice_already_seen_between_polls_checkpoints_at_once():
    notice = PreemptionNotice(lambda: {"deadline_ms": 1}, every_steps=10)
    assert notice.poll()  # the test hook's wait polls by itself
    assert [notice.checkpoint_due(step) for step in (5, 6, 10)] == [True, False, False]


def test_upload_mode_and_preemption_budget_are_checked():
    assert PretrainConfig().checkpoint.checkpoint_upload == "async"
    with pytest.raises(ValueError, match=r"--checkpoint-upload must be one of \('sync', 'async'\), got 'later'"):
        PretrainConfig.from_flat(checkpoint_upload="later")
    with pytest.raises(ValueError, match="--max-preemptions must be at least -1, got -2"):
        PretrainConfig.from_flat(max_preemption_failures=-2)
