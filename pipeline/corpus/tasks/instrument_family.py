"""Instrument family: 11 General MIDI families, short random melodies rendered from soundfonts.

Held out: the soundfont (train and valid render through MuseScore General, test through TimGM6mb).
Valid uses other melodies of the train soundfont.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from pipeline.corpus.sources.holdout import TEST_SOUNDFONT, TRAIN_SOUNDFONT
from pipeline.corpus.sources.soundfonts import GM_FAMILIES, random_melody, render_slots
from pipeline.corpus.tasks.clip_shaping import shape_clip
from pipeline.corpus.tasks.hear_writer import LabeledClip, TaskBuild, TaskSpec

# The acoustic-instrument families; synth and sound-effect families have no shared timbre to learn.
FAMILIES = (
    "piano",
    "chromatic_percussion",
    "organ",
    "guitar",
    "bass",
    "strings",
    "ensemble",
    "brass",
    "reed",
    "pipe",
    "ethnic",
)
PITCH_RANGES = {"bass": (28, 55), "chromatic_percussion": (60, 84)}  # others: DEFAULT_PITCH_RANGE
DEFAULT_PITCH_RANGE = (48, 79)
SAMPLE_DURATION_S = 2.5
NOTE_MS, N_NOTES, SLOT_MS = 400, 5, 3500
MELODIES_PER_PROGRAM = {"train": 12, "valid": 2, "test": 4}
TINY_MELODIES_PER_PROGRAM = {"train": 1, "valid": 1, "test": 1}
TINY_PROGRAMS_PER_FAMILY = 2

SPEC = TaskSpec(
    name="instrument_family",
    labels=FAMILIES,
    sample_duration_s=SAMPLE_DURATION_S,
    held_out="soundfont",
    description="General MIDI instrument family of a 5-note melody rendered by fluidsynth (8 programs per family).",
    notes=f"Train/valid soundfont {TRAIN_SOUNDFONT}; test soundfont {TEST_SOUNDFONT}.",
)


def family_programs(family: str, *, tiny: bool) -> list[int]:
    first = 8 * GM_FAMILIES.index(family)
    return list(range(first, first + (TINY_PROGRAMS_PER_FAMILY if tiny else 8)))


def build(*, seed: int, tiny: bool, work_dir: Path) -> TaskBuild:
    rng = np.random.default_rng(seed)
    per_program = TINY_MELODIES_PER_PROGRAM if tiny else MELODIES_PER_PROGRAM
    clips = []
    for soundfont, splits in ((TRAIN_SOUNDFONT, ("train", "valid")), (TEST_SOUNDFONT, ("test",))):
        plan, slots = [], []
        for split in splits:
            for family in FAMILIES:
                low_pitch, high_pitch = PITCH_RANGES.get(family, DEFAULT_PITCH_RANGE)
                for program in family_programs(family, tiny=tiny):
                    for _ in range(per_program[split]):
                        plan.append((split, family, program))
                        slots.append(
                            random_melody(
                                rng,
                                program=program,
                                low_pitch=low_pitch,
                                high_pitch=high_pitch,
                                n_notes=N_NOTES,
                                note_ms=NOTE_MS,
                            )
                        )
        waves = render_slots(
            soundfont, slots, slot_ms=SLOT_MS, clip_ms=round(SAMPLE_DURATION_S * 1000), work_dir=work_dir
        )
        clips += [
            LabeledClip(
                split=split,
                label=family,
                wave=shape_clip(wave, SAMPLE_DURATION_S),
                source={"soundfont": soundfont, "program": program, "pitches": [note.pitch for note in slot.notes]},
            )
            for (split, family, program), slot, wave in zip(plan, slots, waves)
        ]
    return TaskBuild(spec=SPEC, clips=clips)
