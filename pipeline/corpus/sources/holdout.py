"""What every task holds out for its test split, fixed independently of the seed.

The held-out speakers, kits, soundfonts, voice variants and prompt texts are properties of the
benchmark (like HEAR's fixed splits), so the pretraining corpus can leave the test material out
and a re-run with another seed re-samples clips without moving anything across the split line.
"""

from __future__ import annotations

import zlib

Split = str  # "train" | "valid" | "test"

# Real spoken language: the second speaker of a language is only ever tested on.
LANGUAGE_SECOND_SPEAKERS = ("menardi", "es-co", "armelle")

# Speaker count: these voices are mixed only into test clips (train/valid use the others).
SPEAKER_COUNT_TEST_SPEAKERS = ("fillets-cs-v", "fillets-nl-m", "menardi", "es-co", "armelle")

# Drum type: whole kits per split; the test kits cover every class between them.
DRUM_VALID_KITS = ("Millo_MultiLayered2", "HardElectro1")
DRUM_TEST_KITS = ("The Black Pearl 1.0", "Gimme A Hand 1.0", "VariBreaks")

# Pitch and instrument family: train/valid render through one soundfont, test through another.
TRAIN_SOUNDFONT = "MuseScore_General_Lite.sf3"
TEST_SOUNDFONT = "TimGM6mb.sf2"

# espeak-ng voice variants (`-v <language>+<variant>`), disjoint per split.
TRAIN_VOICE_VARIANTS = (
    "m1",
    "m2",
    "m3",
    "m4",
    "m5",
    "f1",
    "f2",
    "f3",
    "adam",
    "Alex",
    "Alicia",
    "Andy",
    "aunty",
    "benjamin",
    "caleb",
    "david",
    "ed",
    "edward",
    "Gene",
    "iven",
    "john",
    "linda",
    "max",
    "Mike",
    "paul",
    "robert",
    "steph",
    "travis",
)
VALID_VOICE_VARIANTS = ("m6", "f4", "Andrea", "Hugo", "michel", "rob")
TEST_VOICE_VARIANTS = ("m7", "f5", "Annie", "antonio", "belinda", "Jacky", "Lee", "quincy", "victor", "zac")


def stable_fraction(key: str) -> float:
    """A number in [0, 1) fixed by `key` alone (Python's `hash` changes between processes).

    CRC-32 rather than a cryptographic hash: it is computed for every entry of nine word lists
    (2.7 million words), and only needs to spread keys evenly.
    """
    return zlib.crc32(key.encode("utf-8")) / 2**32


def prompt_split(prompt_id: str) -> Split:
    """Asterisk prompt texts (one file name = one text in every language): 70/10/20."""
    fraction = stable_fraction(f"prompt:{prompt_id}")
    return "train" if fraction < 0.7 else "valid" if fraction < 0.8 else "test"


def word_split(word: str) -> Split:
    """Word-list entries for synthetic speech: test sentences use words never spoken in train."""
    fraction = stable_fraction(f"word:{word}")
    return "train" if fraction < 0.7 else "valid" if fraction < 0.8 else "test"


def is_test_material(*, speaker: str | None = None, prompt_id: str | None = None, kit: str | None = None) -> bool:
    """True for audio some task tests on; the pretraining corpus leaves it out."""
    if speaker is not None and (speaker in LANGUAGE_SECOND_SPEAKERS or speaker in SPEAKER_COUNT_TEST_SPEAKERS):
        return True
    if prompt_id is not None and prompt_split(prompt_id) == "test":
        return True
    return kit is not None and kit in DRUM_TEST_KITS
