"""Which checkpoint a run resumes from: the newest one whose files still match their digests.

Ray Train hands the worker its latest checkpoint. When that one is damaged (a truncated or partly
overwritten file, found by `pipeline.checkpoint.verify_checkpoint`), failing would fail every
retry and every re-run the same way, so the run falls back to the newest earlier checkpoint of the
same run that verifies, and says which it skipped and why. Every rank makes the same choice: it is
a pure function of the files. No Ray here: the checkpoint is read through its `path` and pyarrow
`filesystem`, so a run stored in a bucket resumes the same way (each candidate is copied down).
"""

from __future__ import annotations

import contextlib
import json
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path

import pyarrow.fs as pafs

from pipeline.checkpoint import META_FILE, SIZES_KEY, CheckpointError, verify_checkpoint
from pipeline.storage.checkpoint_copy import copy_down

CHECKPOINT_PREFIX = "checkpoint_step_"  # the loop names every checkpoint folder checkpoint_step_<step:08d>


def newest_verified_checkpoint(directories: Sequence[str | Path]) -> tuple[Path | None, list[tuple[Path, str]]]:
    """(the newest local checkpoint folder that verifies, [(skipped newer folder, why), ...]).

    Newest = highest step in the folder name (zero-padded, so name order). None when none verifies."""
    skipped = []
    for directory in sorted(map(Path, directories), key=lambda path: path.name, reverse=True):
        try:
            verify_checkpoint(directory)
        except CheckpointError as error:
            skipped.append((directory, str(error)))
            continue
        return directory, skipped
    return None, skipped


def announce_resume_point(storage_path: str, run_name: str, *, say=print) -> None:
    """Before the workers start: which of the run's checkpoints a re-run will skip, and the one it
    resumes from, said where the user sees it (the workers' own messages reach only Ray's worker
    logs). The same choice the workers make (`resume_directory`), in a folder or a bucket (where
    each candidate's listed sizes are checked against the sizes its model.json records, newest
    first, until one is whole; the workers then check the sha256 of the one they load)."""
    if "://" not in storage_path:
        directories = [p for p in (Path(storage_path) / run_name).glob(f"**/{CHECKPOINT_PREFIX}*") if p.is_dir()]
        chosen, skipped = newest_verified_checkpoint(directories) if directories else (None, [])
        skipped = [(str(path), why) for path, why in skipped]
    else:
        chosen, skipped = _newest_verified_in_bucket(storage_path, run_name)
    for path, why in skipped:
        say(f"resume: skipping checkpoint {path}: {why}")
    if chosen is not None and skipped:
        say(f"resume: resuming from {chosen} instead ({len(skipped)} newer checkpoint(s) skipped)")
    elif chosen is not None:
        step = int(str(chosen).rstrip("/").rpartition(CHECKPOINT_PREFIX)[2] or 0)
        say(f"resume: resuming run {run_name!r} from step {step} ({chosen})")


def _newest_verified_in_bucket(storage_path: str, run_name: str) -> tuple[str | None, list[tuple[str, str]]]:
    filesystem, root = pafs.FileSystem.from_uri(storage_path)
    selector = pafs.FileSelector(f"{root.rstrip('/')}/{run_name}", allow_not_found=True, recursive=True)
    candidates = sorted(
        (
            info.path
            for info in filesystem.get_file_info(selector)
            if info.type == pafs.FileType.Directory and info.base_name.startswith(CHECKPOINT_PREFIX)
        ),
        key=lambda path: path.rpartition("/")[2],
        reverse=True,
    )
    skipped = []
    for path in candidates:
        damage = _listed_damage(path, filesystem)
        if damage is None:  # a checkpoint saved before sizes were recorded: copied down and verified whole
            with _local_copy(path, filesystem) as local:
                chosen, why = newest_verified_checkpoint([local])
            damage = None if chosen is not None else why[0][1]
        if not damage:
            return path, skipped
        skipped.append((path, damage))
    return None, skipped


def _listed_damage(path: str, filesystem: pafs.FileSystem) -> str | None:
    """What one listing and model.json say is wrong with the checkpoint at `path` ("" when nothing);
    None when model.json records no sizes to compare. The driver asks this, not the sha256, so it
    does not copy a checkpoint of gigabytes down only to look (the workers verify what they load)."""
    listed = {
        info.base_name: info.size
        for info in filesystem.get_file_info(pafs.FileSelector(path, allow_not_found=True))
        if info.type == pafs.FileType.File
    }
    if META_FILE not in listed:
        return f"{path} has no {META_FILE}: the checkpoint is incomplete"
    with filesystem.open_input_stream(f"{path}/{META_FILE}") as stream:
        try:
            sizes = json.loads(stream.read().decode("utf-8")).get(SIZES_KEY)
        except (json.JSONDecodeError, UnicodeDecodeError) as error:
            return f"{path}/{META_FILE} is damaged (not valid JSON: {error})"
    if not sizes:
        return None
    for name, size in sorted(sizes.items()):
        if name not in listed:
            return f"{path}/{name} is missing: the checkpoint is incomplete"
        if listed[name] != size:
            return (
                f"{path}/{name} is damaged: {listed[name]} bytes in storage, {size} recorded in {META_FILE} when it "
                "was saved (an upload cut short, or overwritten since)"
            )
    return ""


def _sibling_checkpoints(path: str, filesystem: pafs.FileSystem) -> list[str]:
    """The checkpoint folders next to `path` (the run's other checkpoints), `path` included."""
    parent = path.rstrip("/").rpartition("/")[0] or "/"
    infos = filesystem.get_file_info(pafs.FileSelector(parent, allow_not_found=True))
    names = [
        info.path
        for info in infos
        if info.type == pafs.FileType.Directory and info.base_name.startswith(CHECKPOINT_PREFIX)
    ]
    return sorted(set(names) | {path.rstrip("/")})


@contextlib.contextmanager
def _local_copy(path: str, filesystem: pafs.FileSystem) -> Iterator[Path]:
    if isinstance(filesystem, pafs.LocalFileSystem):
        yield Path(path)
        return
    with tempfile.TemporaryDirectory(prefix="audioscale-resume-") as directory:
        yield copy_down(path, filesystem, Path(directory))


@contextlib.contextmanager
def resume_directory(checkpoint, *, say=print) -> Iterator[Path]:
    """A local folder of the newest verified checkpoint among `checkpoint` (Ray Train's latest, an
    object with `.path` and `.filesystem`) and its sibling checkpoints; `say` reports each skipped
    one. Raises `CheckpointError` listing every candidate when none verifies."""
    skipped = []
    for path in reversed(_sibling_checkpoints(checkpoint.path, checkpoint.filesystem)):
        with _local_copy(path, checkpoint.filesystem) as local:
            chosen, why = newest_verified_checkpoint([local])
            if chosen is None:
                skipped.append((path, why[0][1]))
                say(f"resume: skipping checkpoint {path}: {why[0][1]}")
                continue
            if skipped:
                say(f"resume: resuming from {path} instead ({len(skipped)} newer checkpoint(s) skipped)")
            yield chosen
            return
    raise CheckpointError(
        "no checkpoint of this run verifies, so it cannot resume: "
        + "; ".join(f"{path}: {why}" for path, why in skipped)
        + ". Delete the run's folder under --storage-path (or use a new --run-name) to start over."
    )
