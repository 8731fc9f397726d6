"""OpenTTD's OpenSFX: 73 real recorded sound effects packed in one `opensfx.cat` container.

Container layout (little-endian): a table of (offset, size) uint32 pairs, one per sound, where
the offset's top bit is a format flag; the first offset / 8 is therefore the number of sounds.
At each offset: one length byte, that many bytes of NUL-terminated text (title, author and
license of the sound), then `size` bytes of a complete RIFF/WAVE file.
"""

from __future__ import annotations

import io
import struct
from pathlib import Path

import soundfile

from pipeline.corpus.sources.records import SourceClip

OPENSFX_CAT = Path("/usr/share/games/openttd/baseset/opensfx/opensfx.cat")
OFFSET_FLAG = 0x8000_0000


class OpenSfxFormatError(ValueError):
    """`opensfx.cat` does not have the layout described in this module."""


def read_opensfx_catalog(cat_path: Path = OPENSFX_CAT) -> list[tuple[str, bytes]]:
    """[(description, wav bytes)] in container order."""
    data = Path(cat_path).read_bytes()
    if len(data) < 8:
        raise OpenSfxFormatError(f"{cat_path}: {len(data)} bytes is too short for an OpenSFX container")
    n_sounds = (struct.unpack_from("<I", data, 0)[0] & ~OFFSET_FLAG) // 8
    sounds = []
    for index in range(n_sounds):
        offset, size = struct.unpack_from("<II", data, 8 * index)
        offset &= ~OFFSET_FLAG
        name_length = data[offset]
        description = data[offset + 1 : offset + 1 + name_length].rstrip(b"\0").decode("utf-8", errors="replace")
        wav = data[offset + 1 + name_length : offset + 1 + name_length + size]
        if wav[:4] != b"RIFF" or wav[8:12] != b"WAVE" or len(wav) != size:
            raise OpenSfxFormatError(f"{cat_path}: sound {index} at byte {offset} is not a complete RIFF/WAVE file")
        sounds.append((description, wav))
    return sounds


def prepare_opensfx(output_dir: Path, cat_path: Path = OPENSFX_CAT) -> list[SourceClip]:
    """Unpack every non-empty sound to `output_dir/opensfx_<index>.wav`; `info` keeps its credits.

    Two of the 73 entries are placeholder files without samples ("Unused/Nothing"): skipped.
    """
    output_dir.mkdir(parents=True, exist_ok=True)
    clips = []
    for index, (description, wav) in enumerate(read_opensfx_catalog(cat_path)):
        if soundfile.info(io.BytesIO(wav)).frames == 0:
            continue
        path = output_dir / f"opensfx_{index:03d}.wav"
        path.write_bytes(wav)
        clips.append(
            SourceClip(
                path=path,
                source="openttd_opensfx",
                package="openttd-opensfx",
                group=f"opensfx_{index:03d}",
                info={"attribution": description},
            )
        )
    return clips
