"""What became of every prep input, gathered on the driver from the batches' records.

The rows say nothing of inputs that produced none; each batch's record (`pipeline.prep.progress`)
carries one outcome per work item (a file, or a time range of a long file), and the ledger is where
they meet. Outcomes are keyed by (source, range), so a batch reported twice (a retried task, or a
record read back on resume) counts once; a file is finished once all its ranges have reported. It
holds only per-item metadata, never audio.
"""

from __future__ import annotations

from pipeline.prep.ranges import combine_item_outcomes


class PrepLedger:
    def __init__(self):
        self.outcomes: dict[str, dict[int, dict]] = {}  # source -> range index -> outcome
        self.num_ranges: dict[str, int] = {}
        self.finished_files = 0
        self.audio_s = 0.0

    def report(self, outcomes: list[dict]) -> None:
        """One dict per finished item: source, range_index, num_ranges, range_start_s and the
        fields of `segments.FileOutcome`."""
        for outcome in outcomes:
            source, range_index = outcome["source"], outcome["range_index"]
            by_range = self.outcomes.setdefault(source, {})
            self.num_ranges[source] = outcome["num_ranges"]
            previous = by_range.get(range_index)
            if previous is None and len(by_range) + 1 == outcome["num_ranges"]:
                self.finished_files += 1
            self.audio_s += outcome["audio_s"] - (previous["audio_s"] if previous else 0.0)
            by_range[range_index] = outcome

    def progress(self) -> tuple[int, float]:
        """(files finished, seconds of audio turned into rows so far)."""
        return self.finished_files, self.audio_s

    def summary(self) -> dict:
        verdicts = [
            combine_item_outcomes(source, by_range, self.num_ranges[source])
            for source, by_range in self.outcomes.items()
        ]
        silent = {
            source: sum(outcome.get("silent_s", 0.0) for outcome in by_range.values())
            for source, by_range in self.outcomes.items()
        }
        return {
            "silent": [{"path": s, "silent_s": round(t, 3)} for s, t in sorted(silent.items()) if t > 0],
            "rejected": [verdict.rejected for verdict in verdicts if verdict.rejected],
            "partial": [verdict.partial for verdict in verdicts if verdict.partial],
            "dropped_tail_s": sum(verdict.dropped_tail_s for verdict in verdicts),
        }
