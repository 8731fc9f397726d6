"""One input file -> log-mel segments of at most `segment_s` seconds, read block by block.

Reading one segment at a time keeps memory bounded by the segment length, not the file length.
Each segment is treated as a clip of its own: it is resampled and analysed (centred STFT, dB range)
independently of its neighbours, which is what a training crop of it sees anyway.

Policies (all reported, none silent):
- NaN/inf samples reject the whole file (`frontend.check_finite` says why; only float files can
  hold them, so only those are scanned before any row is made). A long file split into time
  ranges (`pipeline.prep.ranges`) is scanned range by range, so there they reject only their range
  and the file is listed as decoded in part.
- A file shorter than one analysis window (`preset.min_samples` at 16 kHz) is rejected as too short.
- A trailing remainder shorter than that is dropped; its seconds are returned in `dropped_tail_s`.
- A truncated file yields the audio that is there (libsndfile reads up to the end of the data).
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import soundfile

from pipeline.audio.frontend import (
    TARGET_SAMPLE_RATE_HZ,
    AudioDecodeError,
    FrontendPreset,
    check_file_not_empty,
    check_finite,
    compute_features,
    to_mono_16k,
)
from pipeline.audio.input_bytes import InputLocation, open_input_bytes

FLOAT_SUBTYPES = frozenset({"FLOAT", "DOUBLE"})
SCAN_BLOCK_FRAMES = 1 << 20
# A segment whose loudest sample is under -70 dBFS is (near-)digital silence: it becomes rows like
# any other, but trains nothing, and prep says how much of the audio it is.
SILENT_PEAK = 10 ** (-70 / 20)


@dataclasses.dataclass(frozen=True, kw_only=True)
class Segment:
    index: int
    offset_s: float
    duration_s: float
    mel: np.ndarray  # float32 (frames, n_mels)
    peak: float = 1.0  # the largest absolute sample of the 16 kHz wave (1.0 = full scale)


@dataclasses.dataclass(kw_only=True)
class FileOutcome:
    """What became of one file, filled in while its segments are consumed."""

    num_segments: int = 0
    audio_s: float = 0.0  # seconds that became segments
    silent_s: float = 0.0  # of those, seconds of segments whose peak is under SILENT_PEAK
    dropped_tail_s: float = 0.0
    rejection_kind: str | None = None  # set when the file produced no segments
    rejection_reason: str | None = None
    partial_reason: str | None = None  # the decoder failed after some segments were made


@contextlib.contextmanager
def _open(location: InputLocation) -> Iterator[soundfile.SoundFile]:
    """The input's decoder: a local file opened by path; an object in a bucket or a tar member through
    its bytes (`pipeline.audio.input_bytes`), read ahead in blocks."""
    if location.is_local_file:
        with _open_local(Path(location.path)) as handle:
            yield handle
        return
    if location.member_size == 0:
        raise AudioDecodeError(location.path, "empty file (0 bytes)", kind="empty file")
    try:
        with open_input_bytes(location) as stream:
            if location.member_size is None and stream.seek(0, io.SEEK_END) == 0:
                raise AudioDecodeError(location.path, "empty file (0 bytes)", kind="empty file")
            stream.seek(0)
            try:
                handle = soundfile.SoundFile(stream)
            except (soundfile.LibsndfileError, RuntimeError, TypeError) as error:
                raise AudioDecodeError(location.path, f"not readable as audio ({error})", kind="not audio") from error
            with handle:
                yield handle
    except OSError as error:  # the store refused or dropped the read: said, and the input rejected, not lost
        raise AudioDecodeError(
            location.path, f"cannot read it from the store ({' '.join(str(error).split())[:200]})", kind="unreadable"
        ) from error


def _open_local(path: Path) -> soundfile.SoundFile:
    check_file_not_empty(path)
    try:  # libsndfile says only "System error." for a file this user may not read
        with open(path, "rb"):
            pass
    except PermissionError as error:
        raise AudioDecodeError(
            path, f"this user may not read it ({error.strerror}); give it read permission (chmod a+r), or run as its owner",
            kind="permission denied",
        ) from error  # fmt: skip
    try:
        return soundfile.SoundFile(str(path))
    except (soundfile.LibsndfileError, RuntimeError, TypeError) as error:
        raise AudioDecodeError(path, f"not readable as audio ({error})", kind="not audio") from error


def _scan_float_samples(path: Path, handle: soundfile.SoundFile, num_frames: int | None) -> None:
    """Check `num_frames` samples from the current position (None: to the end), then seek back."""
    start = handle.tell()
    frames = -1 if num_frames is None else num_frames
    for block in handle.blocks(blocksize=SCAN_BLOCK_FRAMES, frames=frames, dtype="float32", always_2d=True):
        check_finite(path, block)
    handle.seek(start)


def iter_segments(
    path: str | Path | InputLocation,
    preset: FrontendPreset,
    segment_s: float,
    *,
    first_segment: int = 0,
    max_segments: int | None = None,
) -> Iterator[Segment | float]:
    """Yield `Segment`s in order; the last item may be a float: seconds of a dropped short tail.

    `first_segment` / `max_segments` select a time range of whole segments (a long file is split
    across tasks this way); indices and offsets are those of the whole file, so a range yields
    exactly the segments a full read yields there. A range that starts past the end yields nothing.
    """
    location = path if isinstance(path, InputLocation) else InputLocation(path=str(path))
    path = Path(location.path) if location.is_local_file else location.path  # what messages name
    with _open(location) as handle:
        if handle.frames == 0:
            raise AudioDecodeError(path, "contains no audio samples (zero-length)", kind="zero-length")
        block_frames = max(1, int(round(segment_s * handle.samplerate)))
        offset_frames, index = first_segment * block_frames, first_segment
        if offset_frames:
            handle.seek(min(offset_frames, handle.frames))
        if handle.subtype in FLOAT_SUBTYPES:
            # Only this range's samples: each range of a split file checks its own part.
            _scan_float_samples(path, handle, None if max_segments is None else max_segments * block_frames)
        end_index = None if max_segments is None else first_segment + max_segments
        while end_index is None or index < end_index:
            block = handle.read(block_frames, dtype="float32", always_2d=True)  # (samples, channels)
            if len(block) == 0:
                break
            wave_16k = to_mono_16k(block, handle.samplerate)
            offset_s, duration_s = offset_frames / handle.samplerate, len(block) / handle.samplerate
            offset_frames += len(block)
            if len(wave_16k) < preset.min_samples:
                if index == 0:
                    raise AudioDecodeError(
                        path,
                        f"too short: {1000 * duration_s:.1f} ms of audio; at least "
                        f"{1000 * preset.min_samples / TARGET_SAMPLE_RATE_HZ:.1f} ms is needed",
                        kind="too short",
                    )
                yield duration_s
                break
            yield Segment(
                index=index, offset_s=offset_s, duration_s=duration_s, mel=compute_features(wave_16k, preset),
                peak=float(np.abs(wave_16k).max()),
            )  # fmt: skip
            index += 1


def featurize_file(
    path: str | Path | InputLocation,
    preset: FrontendPreset,
    segment_s: float,
    outcome: FileOutcome,
    *,
    first_segment: int = 0,
    max_segments: int | None = None,
) -> Iterator[Segment]:
    """`iter_segments` that never raises for bad audio: what went wrong is written into `outcome`.

    Consumed lazily, so a long file never sits in memory whole.
    """
    try:
        for item in iter_segments(path, preset, segment_s, first_segment=first_segment, max_segments=max_segments):
            if isinstance(item, Segment):
                outcome.num_segments += 1
                outcome.audio_s += item.duration_s
                if item.peak < SILENT_PEAK:
                    outcome.silent_s += item.duration_s
                yield item
            else:
                outcome.dropped_tail_s = item
    except AudioDecodeError as error:
        _record_failure(outcome, error.kind, error.reason)
    except (soundfile.LibsndfileError, RuntimeError, ValueError, MemoryError) as error:
        # A decoder error part-way through a compressed stream (corrupt mp3/ogg frames).
        _record_failure(outcome, "decode error", f"decoding failed ({type(error).__name__}: {error})")


def _record_failure(outcome: FileOutcome, kind: str, reason: str) -> None:
    if outcome.num_segments:
        outcome.partial_reason = reason
    else:
        outcome.rejection_kind, outcome.rejection_reason = kind, reason
