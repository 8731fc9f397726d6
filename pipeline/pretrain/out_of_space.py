"""A storage disk that fills up mid-run: one line, and no half-written checkpoint left behind.

The up-front check (`driver.check_storage_room`) refuses a disk too small for the run's own
checkpoints, but another process can fill it later. Then Ray Train's copy of a checkpoint into
storage fails with ENOSPC inside a worker, and the run used to end in Ray's traceback, leaving a
folder whose last file was cut short (1,028,096 of 1,216,851 bytes of train_state.pt). A resume
would skip it (its model.json records every file's sha256), but a person listing the folder sees a
checkpoint. So the cut-short folders (those newer than the newest one that verifies) are removed,
and the run ends with one line naming the storage and the checkpoint a re-run resumes from.
"""

from __future__ import annotations

import errno
import shutil
from pathlib import Path

from pipeline.pretrain.resume import CHECKPOINT_PREFIX, newest_verified_checkpoint

NO_SPACE_TEXT = "No space left on device"  # strerror(ENOSPC): what a worker's error carries as text


def ran_out_of_space(error: BaseException) -> bool:
    """Whether `error` or any error it was raised from is ENOSPC (Ray passes a worker's error on as
    text inside its own, so the message is searched too)."""
    seen: set[int] = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        if (isinstance(error, OSError) and error.errno == errno.ENOSPC) or NO_SPACE_TEXT in str(error):
            return True
        error = error.__cause__ or error.__context__
    return False


def remove_cut_short_checkpoints(run_folder: Path) -> tuple[Path | None, list[Path]]:
    """Remove the checkpoint folders under `run_folder` newer than the newest one that verifies;
    returns (that newest whole one or None, the removed folders)."""
    folders = [path for path in run_folder.glob(f"**/{CHECKPOINT_PREFIX}*") if path.is_dir()]
    whole, cut_short = newest_verified_checkpoint(folders) if folders else (None, [])
    removed = []
    for folder, _ in cut_short:
        shutil.rmtree(folder, ignore_errors=True)
        removed.append(folder)
    return whole, removed


def out_of_space_message(storage_path: str, run_name: str) -> str:
    """The one line a full storage disk ends the run with, after removing what was cut short."""
    whole, removed = remove_cut_short_checkpoints(Path(storage_path) / run_name)
    said_removed = f"; removed the cut-short {', '.join(str(p) for p in removed)}" if removed else ""
    resume = f"the same command resumes from {whole}" if whole else "no whole checkpoint was written yet"
    return (
        f"--storage-path {storage_path}: no space left on device while a checkpoint was copied there{said_removed}; "
        f"free some space (or keep fewer checkpoints, or choose another path): {resume}"
    )
