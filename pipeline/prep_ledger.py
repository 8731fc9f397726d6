"""A small Ray actor that the prep workers report to: rejections, partial decodes, progress.

Ray Data can write the segment rows, but inputs that produce no rows leave no trace in them; the
ledger is where their reasons go. Entries are keyed by source, so a retried task cannot count a
file twice, and `progress` counts distinct files, which is how the driver knows every report has
arrived. It needs no CPU and holds only per-file metadata, never audio.
"""

from __future__ import annotations

import ray


@ray.remote(num_cpus=0)
class PrepLedger:
    def __init__(self):
        self.rejected: dict[str, dict] = {}
        self.partial: dict[str, dict] = {}
        self.audio_s_by_source: dict[str, float] = {}
        self.dropped_tail_s_by_source: dict[str, float] = {}

    def report(self, outcomes: list[dict]) -> None:
        """One dict per finished file: source, audio_s, dropped_tail_s, and kind/reason if rejected."""
        for outcome in outcomes:
            source = outcome["source"]
            if outcome.get("rejection_reason"):
                self.rejected[source] = {
                    "path": source, "kind": outcome["rejection_kind"], "reason": outcome["rejection_reason"]
                }
                continue
            self.audio_s_by_source[source] = outcome["audio_s"]
            if outcome.get("dropped_tail_s"):
                self.dropped_tail_s_by_source[source] = outcome["dropped_tail_s"]
            if outcome.get("partial_reason"):
                self.partial[source] = {
                    "path": source, "reason": outcome["partial_reason"], "decoded_s": outcome["audio_s"]
                }

    def progress(self) -> tuple[int, float]:
        """(files finished, seconds of audio turned into rows so far)."""
        return len(self.rejected) + len(self.audio_s_by_source), sum(self.audio_s_by_source.values())

    def summary(self) -> dict:
        return {
            "rejected": list(self.rejected.values()),
            "partial": list(self.partial.values()),
            "dropped_tail_s": sum(self.dropped_tail_s_by_source.values()),
        }
