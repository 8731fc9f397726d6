"""Completion markers: a finished build is not redone, a half-finished one is redone from scratch.

`<dir>/.build_complete.json` holds the settings of the finished build; `<dir>/.build_in_progress`
marks a directory this code is writing, so that a crashed build may be wiped and restarted
without ever deleting a directory the user filled with something else.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from pipeline.cli.errors import UserError

COMPLETE_MARKER = ".build_complete.json"
IN_PROGRESS_MARKER = ".build_in_progress"


class OutputDirectoryError(UserError):
    """The output directory holds something other than a build with these settings."""


def is_complete(output_dir: Path, settings: dict) -> bool:
    """True when `output_dir` holds a finished build with exactly `settings`.

    A finished build whose settings differ only by an older `format_version` is not complete: it
    is handed back to `start_build` to be redone. Raises `OutputDirectoryError` for a finished
    build with other settings.
    """
    marker = output_dir / COMPLETE_MARKER
    if not marker.is_file():
        return False
    recorded = json.loads(marker.read_text())
    if _is_older_format_of(recorded, settings):
        # Our own build from older code with the same user settings: nothing of the user's to
        # protect, so flag it as ours-in-progress and let start_build wipe and redo it.
        print(
            f"[build] {output_dir} was built by an older format (version {recorded.get('format_version')}, "
            f"now {settings.get('format_version')}); rebuilding it"
        )
        (output_dir / IN_PROGRESS_MARKER).write_text("")
        marker.unlink()
        return False
    if recorded != settings:
        raise OutputDirectoryError(
            f"{output_dir} already holds a build with other settings ({recorded}); "
            f"choose another --output or delete that directory to rebuild with {settings}"
        )
    return True


def _is_older_format_of(recorded: dict, settings: dict) -> bool:
    """Same settings except a lower `format_version` (absent counts as version 1)."""
    if "format_version" not in settings:
        return False
    others_equal = {k: v for k, v in recorded.items() if k != "format_version"} == {
        k: v for k, v in settings.items() if k != "format_version"
    }
    return others_equal and int(recorded.get("format_version", 1)) < int(settings["format_version"])


def start_build(output_dir: Path) -> None:
    """Make `output_dir` empty and ours: wipe a crashed build of ours, refuse foreign content."""
    if output_dir.exists() and any(output_dir.iterdir()):
        if not (output_dir / IN_PROGRESS_MARKER).is_file():
            raise OutputDirectoryError(
                f"{output_dir} is not empty and was not made by this builder; choose an empty or new --output"
            )
        shutil.rmtree(output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    (output_dir / IN_PROGRESS_MARKER).write_text("")


def finish_build(output_dir: Path, settings: dict) -> None:
    (output_dir / COMPLETE_MARKER).write_text(json.dumps(settings, indent=1, sort_keys=True) + "\n")
    (output_dir / IN_PROGRESS_MARKER).unlink()
