"""A storage disk that fills up mid-run: the cut-short checkpoint is removed, the whole ones stay, and
the run ends in one line naming the storage and the checkpoint a re-run resumes from."""

from __future__ import annotations

import errno
import os

import pytest
import torch

import models
from pipeline.checkpoint import TRAIN_STATE_FILE, save_model_checkpoint, save_train_state
from pipeline.pretrain.out_of_space import out_of_space_message, ran_out_of_space
from tests.support.unwritable import small_folder


def write_checkpoint(folder, step: int) -> None:
    torch.manual_seed(step)
    model = models.build_model("mae-debug")
    optimizer = torch.optim.AdamW(model.parameters())
    model(torch.randn(2, model.spec.crop_frames, model.spec.n_mels)).loss.backward()
    optimizer.step()
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda _: 1.0)
    save_model_checkpoint(folder, model, model_name="mae-debug", overrides={}, step=step, shard_fingerprint="t")
    save_train_state(folder, optimizer=optimizer, scheduler=scheduler, step=step, rng_state={}, data_position={})


def test_enospc_is_found_through_ray_s_wrapping():
    cause = OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), "/runs/x/train_state.pt")
    try:
        try:
            raise cause
        except OSError as error:
            raise RuntimeError("TrainingFailedError: worker group failed") from error
    except RuntimeError as wrapped:
        assert ran_out_of_space(wrapped)
    assert ran_out_of_space(RuntimeError("worker 0: OSError: [Errno 28] No space left on device"))
    assert not ran_out_of_space(RuntimeError("worker 0: OSError: [Errno 13] Permission denied"))


def test_a_checkpoint_cut_short_by_a_full_disk_is_removed_and_the_whole_one_named(tmp_path):
    with small_folder(tmp_path, "64m") as disk:
        if disk is None:
            pytest.skip("making a small filesystem needs root and tmpfs mounts")
        run = disk / "runs" / "r"
        write_checkpoint(run / "checkpoint_step_00000010", 10)
        cut = run / "checkpoint_step_00000020"
        write_checkpoint(cut, 20)
        state = cut / TRAIN_STATE_FILE
        os.truncate(state, state.stat().st_size * 5 // 6)  # as the full disk left it: 1,028,096 of 1,216,851
        line = out_of_space_message(str(disk / "runs"), "r")
        assert line.startswith(f"--storage-path {disk / 'runs'}: no space left on device"), line
        assert f"removed the cut-short {cut}" in line and f"resumes from {run / 'checkpoint_step_00000010'}" in line
        assert not cut.exists() and (run / "checkpoint_step_00000010" / TRAIN_STATE_FILE).exists()
