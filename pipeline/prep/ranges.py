"""Splitting long inputs into time ranges, so no single Ray task has to hold a whole long file.

A Ray Data write task keeps every block of its Parquet part in memory until it writes the part,
so one 10-hour file handled by one task would build a ~600 MB part. A file longer than
`max_range_s` is therefore cut into ranges of whole segments (`WorkItem`), each handled as if it
were a file of its own; the segment indices and offsets stay those of the whole file, so the rows,
their clip ids and their order are exactly those an unsplit run makes.

Only files large enough to hold more than `max_range_s` seconds at a very low bit rate
(`MIN_BYTES_PER_AUDIO_S`) have their header read on the driver; everything else is one item.
The last range of a file is open-ended, so a header that misstates the length loses nothing.
"""

from __future__ import annotations

import dataclasses
import math
from concurrent.futures import ThreadPoolExecutor

from pipeline.audio.input_file import InputFile
from pipeline.audio.inputs import audio_info

# 1 kB/s is 8 kbit/s, below any speech codec setting used for corpora: a file under
# max_range_s * 1 kB cannot be longer than max_range_s, so its header need not be read.
MIN_BYTES_PER_AUDIO_S = 1000.0
# One hour of 80-bin float16 mel is ~58 MB of rows: a task's part stays well under memory limits.
DEFAULT_MAX_RANGE_S = 3600.0


@dataclasses.dataclass(frozen=True, kw_only=True)
class WorkItem:
    """One file, or one time range of whole segments of a long file."""

    input: InputFile
    first_segment: int = 0
    max_segments: int | None = None  # None: to the end of the file
    range_index: int = 0
    num_ranges: int = 1
    size_bytes: float = 0.0  # this item's share of the file's bytes, for batch sizing

    def row(self, segment_s: float) -> dict:
        """The item as a Ray Data row for the featurize UDF."""
        return {
            "path": self.input.path,
            "member_offset": self.input.member_offset,
            "member_size": self.input.size_bytes if self.input.member_offset is not None else None,
            "source": self.input.source,
            "label": self.input.label,
            "split": self.input.split,
            "first_segment": self.first_segment,
            "max_segments": self.max_segments,
            "range_index": self.range_index,
            "num_ranges": self.num_ranges,
            "range_start_s": self.first_segment * segment_s,
        }


def _probe_segments(item: InputFile, segment_s: float) -> int | None:
    """How many segments the file's header says it holds; None when the header cannot be read
    (the worker then reports why, as for any unreadable file)."""
    try:
        info = audio_info(item)
    except Exception:  # noqa: BLE001 - decoding problems are the worker's to report
        return None
    if not info.samplerate or info.frames <= 0:
        return None
    block_frames = max(1, int(round(segment_s * info.samplerate)))
    return math.ceil(info.frames / block_frames)


def plan_work_items(
    inputs: list[InputFile], *, segment_s: float, max_range_s: float = DEFAULT_MAX_RANGE_S, io_threads: int = 8
) -> list[WorkItem]:
    """Every input as one item, or as consecutive range items when it is longer than `max_range_s`."""
    if max_range_s <= 0:
        raise ValueError(f"max_range_s must be positive, got {max_range_s}")
    segments_per_range = max(1, math.floor(max_range_s / segment_s))
    maybe_long = [item for item in inputs if item.size_bytes > max_range_s * MIN_BYTES_PER_AUDIO_S]
    with ThreadPoolExecutor(io_threads) as pool:
        # Headers only; threads hide file-system latency when a corpus has many large files.
        num_segments = dict(
            zip(
                (item.source for item in maybe_long),
                pool.map(lambda item: _probe_segments(item, segment_s), maybe_long),
            )
        )
    items = []
    for item in inputs:
        total = num_segments.get(item.source)
        if total is None or total <= segments_per_range:
            items.append(WorkItem(input=item, size_bytes=item.size_bytes))
            continue
        num_ranges = math.ceil(total / segments_per_range)
        for range_index in range(num_ranges):
            last = range_index == num_ranges - 1
            share = (total - range_index * segments_per_range if last else segments_per_range) / total
            items.append(
                WorkItem(
                    input=item,
                    first_segment=range_index * segments_per_range,
                    max_segments=None if last else segments_per_range,
                    range_index=range_index,
                    num_ranges=num_ranges,
                    size_bytes=item.size_bytes * share,
                )
            )
    return items


@dataclasses.dataclass(kw_only=True)
class FileVerdict:
    """What became of one input once the outcomes of all its items are in."""

    audio_s: float = 0.0
    dropped_tail_s: float = 0.0
    rejected: dict | None = None  # {"path", "kind", "reason"} when the file produced no rows
    partial: dict | None = None  # {"path", "reason", "decoded_s"} when some of it failed


def _describe_failures(failures: list[tuple[str, str]]) -> str:
    """(where, reason) pairs -> 'reason (from 0 s, from 3600 s); other reason (...)', each reason once."""
    places_by_reason: dict[str, list[str]] = {}
    for where, reason in failures:
        places_by_reason.setdefault(reason, []).append(where)
    return "; ".join(f"{reason} ({', '.join(places)})" for reason, places in places_by_reason.items())


def combine_item_outcomes(source: str, outcomes: dict[int, dict], num_ranges: int) -> FileVerdict:
    """One verdict per file from the outcome dicts of its items, keyed by range index.

    A whole file keeps the single-item policies of `pipeline.audio.segments` unchanged. For a split
    file: no rows from any range -> rejected; rows from some ranges and failures (or missing
    reports) in others -> rows kept and the file listed as partial, with each failure's time range.
    """
    if num_ranges == 1 and 0 in outcomes:
        outcome = outcomes[0]
        if outcome.get("rejection_reason"):
            return FileVerdict(
                rejected={"path": source, "kind": outcome["rejection_kind"], "reason": outcome["rejection_reason"]}
            )
        partial = None
        if outcome.get("partial_reason"):
            partial = {"path": source, "reason": outcome["partial_reason"], "decoded_s": outcome["audio_s"]}
        return FileVerdict(audio_s=outcome["audio_s"], dropped_tail_s=outcome["dropped_tail_s"], partial=partial)
    failures, kinds = [], []
    for range_index in range(num_ranges):
        outcome = outcomes.get(range_index)
        if outcome is None:
            failures.append((f"time range {range_index + 1} of {num_ranges}", "no report (a worker failed?); re-run"))
            kinds.append("lost")
        elif outcome.get("rejection_reason") or outcome.get("partial_reason"):
            reason = outcome.get("rejection_reason") or outcome["partial_reason"]
            failures.append((f"time range from {outcome['range_start_s']:g} s", reason))
            kinds.append(outcome.get("rejection_kind") or "decode error")
    reported = list(outcomes.values())
    audio_s = sum(outcome["audio_s"] for outcome in reported)
    if not any(outcome["num_segments"] for outcome in reported):
        return FileVerdict(
            rejected={
                "path": source,
                "kind": kinds[0] if kinds else "no audio",
                "reason": _describe_failures(failures) or "no segments in any time range",
            }
        )
    partial = {"path": source, "reason": _describe_failures(failures), "decoded_s": audio_s} if failures else None
    return FileVerdict(audio_s=audio_s, dropped_tail_s=sum(o["dropped_tail_s"] for o in reported), partial=partial)
