"""Folders a test cannot write in, made for real: a read-only mount, a full disk, or (not root) a
folder without write permission. Root ignores permission bits, so as root the folder is a small
tmpfs mounted read-only or nearly full; where mounting is not allowed either, a sysfs folder (which
refuses new files to root too) stands in for the read-only case."""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path


def _mount_tmpfs(target: Path, options: str) -> bool:
    target.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(target)], capture_output=True)
    return done.returncode == 0


@contextlib.contextmanager
def read_only_folder(tmp_path: Path) -> Iterator[Path]:
    folder = tmp_path / "read-only"
    if os.geteuid() != 0:
        folder.mkdir()
        folder.chmod(0o555)
        try:
            yield folder
        finally:
            folder.chmod(0o755)
        return
    if not _mount_tmpfs(folder, "ro,size=1m"):
        yield Path("/sys/kernel")
        return
    try:
        yield folder
    finally:
        subprocess.run(["umount", str(folder)], check=False)


@contextlib.contextmanager
def full_folder(tmp_path: Path) -> Iterator[Path | None]:
    """A folder on a filesystem with (almost) no space left; None where none can be made here."""
    folder = tmp_path / "full"
    if os.geteuid() != 0 or not _mount_tmpfs(folder, "size=64k"):
        yield None
        return
    try:
        with contextlib.suppress(OSError):
            (folder / "filler").write_bytes(b"\0" * 64 * 1024)
        yield folder
    finally:
        subprocess.run(["umount", str(folder)], check=False)


@contextlib.contextmanager
def small_folder(tmp_path: Path, size: str = "1m") -> Iterator[Path | None]:
    """A folder on an empty filesystem of `size` (tmpfs): writable, with little room; None where
    none can be made here."""
    folder = tmp_path / "small"
    if os.geteuid() != 0 or not _mount_tmpfs(folder, f"size={size}"):
        yield None
        return
    try:
        yield folder
    finally:
        subprocess.run(["umount", str(folder)], check=False)
