"""A minimal Standard MIDI File writer (format 0, one track): enough to drive fluidsynth.

Timing: 1000 ticks per quarter note at a tempo of 1,000,000 us per quarter, so one tick is
exactly one millisecond and note times in ms are tick counts (16 samples at 16 kHz).
"""

from __future__ import annotations

import dataclasses
import struct
from pathlib import Path

TICKS_PER_QUARTER = 1000
BEND_RANGE_CENTS = 200.0  # the General MIDI default pitch-bend sensitivity (+-2 semitones)
BEND_CENTRE = 8192  # 14-bit pitch-bend value meaning "no bend"
MICROSECONDS_PER_QUARTER = 1_000_000


@dataclasses.dataclass(frozen=True, kw_only=True)
class MidiNote:
    start_ms: int
    duration_ms: int
    pitch: int  # MIDI note number, 60 = middle C
    velocity: int  # 1..127
    program: int  # General MIDI program 0..127, set just before the note
    channel: int = 0  # 9 would select the drum kit
    bend_cents: float = 0.0  # pitch bend set just before the note; synthesizers default to a +-200 cent range


def variable_length_quantity(value: int) -> bytes:
    """MIDI's big-endian base-128 integer, high bit set on every byte but the last."""
    if value < 0:
        raise ValueError(f"MIDI delta time must be >= 0, got {value}")
    groups = [value & 0x7F]
    value >>= 7
    while value:
        groups.append(0x80 | (value & 0x7F))
        value >>= 7
    return bytes(reversed(groups))


def _events(notes: list[MidiNote]) -> list[tuple[int, int, bytes]]:
    """(time_ms, order, message); at equal times note-offs (0) go before program changes (1) and note-ons (2)."""
    events = []
    for note in notes:
        if not (0 <= note.pitch <= 127 and 1 <= note.velocity <= 127 and 0 <= note.program <= 127):
            raise ValueError(f"MIDI note out of range: {note}")
        if abs(note.bend_cents) >= BEND_RANGE_CENTS:
            raise ValueError(f"pitch bend of {note.bend_cents} cents is outside the +-{BEND_RANGE_CENTS} cent range")
        bend = BEND_CENTRE + round(note.bend_cents / BEND_RANGE_CENTS * BEND_CENTRE)
        events.append((note.start_ms, 1, bytes([0xC0 | note.channel, note.program])))
        events.append((note.start_ms, 1, bytes([0xE0 | note.channel, bend & 0x7F, bend >> 7])))
        events.append((note.start_ms, 2, bytes([0x90 | note.channel, note.pitch, note.velocity])))
        events.append((note.start_ms + note.duration_ms, 0, bytes([0x80 | note.channel, note.pitch, 0])))
    return sorted(events, key=lambda event: (event[0], event[1]))


def write_midi_file(path: Path, notes: list[MidiNote], *, end_ms: int) -> None:
    """Write `notes` as a format-0 MIDI file whose end-of-track is at `end_ms`."""
    track = bytearray()
    track += variable_length_quantity(0) + b"\xff\x51\x03" + MICROSECONDS_PER_QUARTER.to_bytes(3, "big")
    now_ms = 0
    for time_ms, _, message in _events(notes):
        track += variable_length_quantity(time_ms - now_ms) + message
        now_ms = time_ms
    track += variable_length_quantity(max(end_ms - now_ms, 0)) + b"\xff\x2f\x00"
    header = b"MThd" + struct.pack(">IHHH", 6, 0, 1, TICKS_PER_QUARTER)
    Path(path).write_bytes(header + b"MTrk" + struct.pack(">I", len(track)) + bytes(track))
