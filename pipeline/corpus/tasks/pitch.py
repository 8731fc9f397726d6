"""Pitch: 37 MIDI pitches (C3..C6) of single instrument notes rendered from General MIDI soundfonts.

Held out: the soundfont (train and valid render through MuseScore General, test through TimGM6mb,
whose recorded samples differ). Valid uses programs train does not use. Every note is detuned by
up to +-49 cents, the label being the nearest semitone, and velocity, length and onset vary:
with exact tuning a linear probe on average log-mel energies is 99.7 % right and the task would
not separate good representations from bad ones. The label stays a function of the sounding
frequency, so a representation that resolves pitch finely can still score 100 %.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from pipeline.corpus.sources.holdout import TEST_SOUNDFONT, TRAIN_SOUNDFONT
from pipeline.corpus.sources.midi_file import MidiNote
from pipeline.corpus.sources.soundfonts import GM_FAMILIES, NoteSlot, render_slots
from pipeline.corpus.tasks.clip_shaping import shape_clip
from pipeline.corpus.tasks.hear_writer import LabeledClip, TaskBuild, TaskSpec

PITCHES = tuple(range(48, 85))  # 37 semitones, C3..C6
SAMPLE_DURATION_S = 2.0
SLOT_MS = 2500
NOTE_MS_RANGE = (300, 1000)
MAX_ONSET_MS = 300
VELOCITY_RANGE = (40, 127)
MAX_DETUNE_CENTS = 49.0
# Sustained or clearly pitched programs: no basses (their samples stop near C4), no percussive or
# sound-effect programs, no synth effects (noise-like).
PITCHED_PROGRAMS = tuple(
    program for program in range(112) if GM_FAMILIES[program // 8] not in ("bass", "synth_effects")
)
PROGRAMS_PER_SPLIT = {"train": 28, "valid": 6, "test": 10}
TINY_PROGRAMS_PER_SPLIT = {"train": 2, "valid": 1, "test": 1}

SPEC = TaskSpec(
    name="pitch",
    labels=tuple(str(pitch) for pitch in PITCHES),
    sample_duration_s=SAMPLE_DURATION_S,
    held_out="soundfont",
    description="Nearest MIDI pitch (48-84) of one instrument note detuned by up to +-49 cents, rendered by fluidsynth.",
    notes=f"Train/valid soundfont {TRAIN_SOUNDFONT} (valid on programs unused in train); test soundfont {TEST_SOUNDFONT}.",
)


def choose_programs(rng: np.random.Generator, *, tiny: bool) -> dict[str, list[int]]:
    """Disjoint train/valid programs; test programs drawn from all (its soundfont is what is new)."""
    counts = TINY_PROGRAMS_PER_SPLIT if tiny else PROGRAMS_PER_SPLIT
    order = [PITCHED_PROGRAMS[int(index)] for index in rng.permutation(len(PITCHED_PROGRAMS))]
    train = sorted(order[: counts["train"]])
    valid = sorted(order[counts["train"] : counts["train"] + counts["valid"]])
    test = sorted(int(program) for program in rng.choice(PITCHED_PROGRAMS, size=counts["test"], replace=False))
    return {"train": train, "valid": valid, "test": test}


def build(*, seed: int, tiny: bool, work_dir: Path) -> TaskBuild:
    rng = np.random.default_rng(seed)
    programs = choose_programs(rng, tiny=tiny)
    clips = []
    for soundfont, splits in ((TRAIN_SOUNDFONT, ("train", "valid")), (TEST_SOUNDFONT, ("test",))):
        plan = [(split, program, pitch) for split in splits for program in programs[split] for pitch in PITCHES]
        detunes_cents = [round(float(rng.uniform(-MAX_DETUNE_CENTS, MAX_DETUNE_CENTS)), 1) for _ in plan]
        slots = [
            NoteSlot(
                notes=(
                    MidiNote(
                        start_ms=int(rng.integers(0, MAX_ONSET_MS + 1)),
                        duration_ms=int(rng.integers(NOTE_MS_RANGE[0], NOTE_MS_RANGE[1] + 1)),
                        pitch=pitch,
                        velocity=int(rng.integers(VELOCITY_RANGE[0], VELOCITY_RANGE[1] + 1)),
                        program=program,
                        bend_cents=detune_cents,
                    ),
                )
            )
            for (_, program, pitch), detune_cents in zip(plan, detunes_cents)
        ]
        waves = render_slots(
            soundfont, slots, slot_ms=SLOT_MS, clip_ms=round(SAMPLE_DURATION_S * 1000), work_dir=work_dir
        )
        clips += [
            LabeledClip(
                split=split,
                label=str(pitch),
                wave=shape_clip(wave, SAMPLE_DURATION_S),
                source={
                    "soundfont": soundfont,
                    "program": program,
                    "family": GM_FAMILIES[program // 8],
                    "detune_cents": detune_cents,
                },
            )
            for (split, program, pitch), detune_cents, wave in zip(plan, detunes_cents, waves)
        ]
    return TaskBuild(spec=SPEC, clips=clips)
