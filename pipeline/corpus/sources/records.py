"""The record every source preparer returns: one audio file (or rendered clip) and where it came from."""

from __future__ import annotations

import dataclasses
from pathlib import Path


@dataclasses.dataclass(frozen=True, kw_only=True)
class SourceClip:
    """One piece of source audio.

    `group` is the unit a task holds out (a speaker, a drum kit, a soundfont, a voice variant);
    `info` carries the source-specific facts (language, prompt id, instrument name ...) that the
    task builders turn into labels and that the per-split metadata records.
    """

    path: Path
    source: str  # source family, e.g. "asterisk_prompts"
    package: str  # the Debian package that ships (or renders) it, for the attribution file
    group: str
    info: dict = dataclasses.field(default_factory=dict)
