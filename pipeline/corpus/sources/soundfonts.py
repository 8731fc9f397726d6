"""Instrument notes and melodies rendered by fluidsynth through General MIDI soundfonts.

Many notes go into one MIDI file per soundfont (loading a compressed .sf3 costs seconds), each in
its own fixed-length time slot; the rendered file is cut back into one clip per slot.
"""

from __future__ import annotations

import dataclasses
import subprocess
from pathlib import Path

import numpy as np
import soundfile

from pipeline.audio.frontend import TARGET_SAMPLE_RATE_HZ
from pipeline.corpus.sources.midi_file import MidiNote, write_midi_file

SOUNDFONT_FILES: dict[str, tuple[Path, str]] = {
    "MuseScore_General_Lite.sf3": (
        Path("/usr/share/sounds/sf3/MuseScore_General_Lite.sf3"),
        "musescore-general-soundfont-small",
    ),
    "TimGM6mb.sf2": (Path("/usr/share/sounds/sf2/TimGM6mb.sf2"), "timgm6mb-soundfont"),
}
SAMPLES_PER_MS = TARGET_SAMPLE_RATE_HZ // 1000

# The 16 General MIDI families of 8 programs each (program // 8).
GM_FAMILIES = (
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
    "synth_lead",
    "synth_pad",
    "synth_effects",
    "ethnic",
    "percussive",
    "sound_effects",
)


@dataclasses.dataclass(frozen=True, kw_only=True)
class NoteSlot:
    """The notes of one clip, times relative to the start of its slot."""

    notes: tuple[MidiNote, ...]


def soundfont_path(name: str) -> Path:
    if name not in SOUNDFONT_FILES:
        raise ValueError(f"unknown soundfont {name!r}: choose one of {sorted(SOUNDFONT_FILES)}")
    return SOUNDFONT_FILES[name][0]


def soundfont_package(name: str) -> str:
    return SOUNDFONT_FILES[name][1]


def render_slots(
    soundfont: str, slots: list[NoteSlot], *, slot_ms: int, clip_ms: int, work_dir: Path
) -> list[np.ndarray]:
    """Render every slot through `soundfont`; float32 mono clips of `clip_ms` at 16 kHz, slot order.

    Reverb and chorus are off: they smear one slot into the next and are not part of the timbre.
    Output is 32-bit float so that quiet programs keep their resolution before normalisation.
    Dynamic sample loading decodes only the samples the notes use: a .sf3 then loads in a third
    of the time, with identical output.
    """
    if clip_ms > slot_ms:
        raise ValueError(f"clip_ms {clip_ms} longer than slot_ms {slot_ms}")
    work_dir.mkdir(parents=True, exist_ok=True)
    stem = Path(soundfont).stem
    midi_path, wav_path = work_dir / f"{stem}.mid", work_dir / f"{stem}.wav"
    notes = [
        dataclasses.replace(note, start_ms=index * slot_ms + note.start_ms)
        for index, slot in enumerate(slots)
        for note in slot.notes
    ]
    total_ms = len(slots) * slot_ms
    write_midi_file(midi_path, notes, end_ms=total_ms)
    command = [
        "fluidsynth",
        "-ni",
        "-q",
        "-R",
        "0",
        "-C",
        "0",
        "-g",
        "0.5",
        "-r",
        str(TARGET_SAMPLE_RATE_HZ),
        "-o",
        "audio.file.format=float",
        "-o",
        "synth.dynamic-sample-loading=1",
        "-F",
        str(wav_path),
        str(soundfont_path(soundfont)),
        str(midi_path),
    ]
    completed = subprocess.run(command, capture_output=True, check=False)
    if completed.returncode != 0 or not wav_path.is_file():
        raise RuntimeError(f"fluidsynth failed on {soundfont}: {completed.stderr.decode(errors='replace').strip()}")
    stereo, _ = soundfile.read(str(wav_path), dtype="float32", always_2d=True)
    mono = stereo.mean(axis=1, dtype=np.float32)
    mono = np.pad(mono, (0, max(0, total_ms * SAMPLES_PER_MS - len(mono))))
    clip_samples = clip_ms * SAMPLES_PER_MS
    return [
        mono[index * slot_ms * SAMPLES_PER_MS : index * slot_ms * SAMPLES_PER_MS + clip_samples].copy()
        for index in range(len(slots))
    ]


def random_melody(
    rng: np.random.Generator,
    *,
    program: int,
    low_pitch: int,
    high_pitch: int,
    n_notes: int,
    note_ms: int,
    velocity_range: tuple[int, int] = (80, 112),
) -> NoteSlot:
    """`n_notes` back-to-back notes drawn from [low_pitch, high_pitch] (a small random walk)."""
    pitch = int(rng.integers(low_pitch, high_pitch + 1))
    notes = []
    for index in range(n_notes):
        notes.append(
            MidiNote(
                start_ms=index * note_ms,
                duration_ms=note_ms,
                pitch=pitch,
                program=program,
                velocity=int(rng.integers(velocity_range[0], velocity_range[1] + 1)),
            )
        )
        pitch = int(np.clip(pitch + rng.integers(-5, 6), low_pitch, high_pitch))
    return NoteSlot(notes=tuple(notes))
