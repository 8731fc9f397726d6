"""Hydrogen drum kits: real recorded drum samples, instrument names from each `drumkit.xml`."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ElementTree
from pathlib import Path

from pipeline.corpus.sources.records import SourceClip

HYDROGEN_KITS_DIR = Path("/usr/share/hydrogen/data/drumkits")
DRUM_CLASSES = ("kick", "snare", "tom", "hihat", "cymbal", "hand_percussion")

# First matching rule wins. Hand percussion comes first so that "Dununba Bell" or "Cajon Thump"
# are not read as a cymbal or a kick; hats before cymbals so that "Hat Ride" stays a hat.
_CLASS_RULES: tuple[tuple[str, str], ...] = (
    (
        "hand_percussion",
        r"djembe|sangban|dununba|kenkeni|conga|bongo|cajon|maraca|tambourine|cowbell|"
        r"clap|snap|clave|woodblock|agogo|shaker|waterglass",
    ),
    ("hihat", r"\bhh\b|hat|hi-?hat"),
    ("cymbal", r"crash|ride|china|splash|cymbal|\bbell\b"),
    ("kick", r"kick|bass ?drum|\bbd\b"),
    ("snare", r"snare"),
    ("tom", r"\btoms?\b|tom ?(low|mid|hi|high|floor)|floor tom|tomhi"),
)


def drum_class(instrument_name: str) -> str | None:
    """The drum class of a Hydrogen instrument name, or None for sticks, effects and unnamed slots."""
    name = instrument_name.lower()
    for label, pattern in _CLASS_RULES:
        if re.search(pattern, name):
            return label
    return None


def _local_name(tag: str) -> str:
    return tag.rsplit("}", 1)[-1]


def _children(element: ElementTree.Element, name: str) -> list[ElementTree.Element]:
    return [child for child in element if _local_name(child.tag) == name]


def _text(element: ElementTree.Element, name: str) -> str:
    found = _children(element, name)
    return (found[0].text or "").strip() if found else ""


def read_drumkit(kit_dir: Path) -> tuple[str, list[tuple[str, str]]]:
    """(license text, [(instrument name, sample file name)]) for every layer of every instrument."""
    root = ElementTree.parse(kit_dir / "drumkit.xml").getroot()
    layers = []
    for instrument_list in _children(root, "instrumentList"):
        for instrument in _children(instrument_list, "instrument"):
            name = _text(instrument, "name")
            # Old kits name the sample on the instrument, newer ones per velocity layer.
            file_names = [_text(layer, "filename") for layer in _children(instrument, "layer")]
            file_names += [_text(instrument, "filename")] if not file_names else []
            layers += [(name, file_name) for file_name in file_names if file_name]
    return _text(root, "license"), layers


def prepare_hydrogen_drums(kits_dir: Path = HYDROGEN_KITS_DIR, *, labelled_only: bool = True) -> list[SourceClip]:
    """Every sample of every kit (`group` = kit); `info` has the instrument name and drum class."""
    clips = []
    for kit_dir in sorted(path for path in kits_dir.iterdir() if (path / "drumkit.xml").is_file()):
        license_text, layers = read_drumkit(kit_dir)
        for instrument_name, file_name in layers:
            label = drum_class(instrument_name)
            path = kit_dir / file_name
            if (labelled_only and label is None) or not path.is_file():
                continue
            clips.append(
                SourceClip(
                    path=path,
                    source="hydrogen_drums",
                    package="hydrogen-drumkits",
                    group=kit_dir.name,
                    info={"instrument": instrument_name, "drum_class": label, "kit_license": license_text},
                )
            )
    return clips
