"""The prep stage's Ray Data UDF: a batch of work items -> Parquet-ready segment tables.

An item is a whole file or a time range of a long one (`pipeline.prep.ranges`). One call handles
many items (`files_per_batch` in prep.py), so Ray's per-task overhead is paid per batch, not per
file, and rows leave as Arrow tables built from whole numpy buffers, not per-row Python dicts.
What became of each item (rows, or why none) is reported to the `PrepLedger` actor.
"""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa
import ray
import torch

from pipeline.audio.frontend import get_preset
from pipeline.audio.segments import FileOutcome, featurize_file
from pipeline.shards.format import segments_to_table

# About 16 MB of float16 mel per output block (100 ten-second segments of 80 bins).
ROWS_PER_OUTPUT_TABLE = 100


class FeaturizeFiles:
    """Callable for `map_batches(batch_format="pyarrow")` over `WorkItem.row` rows."""

    def __init__(
        self, *, preset_name: str, segment_s: float, ledger: ray.actor.ActorHandle | None, torch_threads: int = 1
    ):
        self.torch_threads = torch_threads
        self.preset = get_preset(preset_name)
        self.segment_s = segment_s
        self.ledger = ledger

    def __call__(self, files: pa.Table) -> Iterator[pa.Table]:
        # One torch thread per worker, set here in the worker (not in the driver that builds this
        # object): parallelism comes from Ray's processes; more threads would only contend.
        torch.set_num_threads(self.torch_threads)
        rows, outcomes = [], []
        for item in files.to_pylist():
            outcome = FileOutcome()
            try:
                segments = featurize_file(
                    item["path"],
                    self.preset,
                    self.segment_s,
                    outcome,
                    first_segment=item["first_segment"],
                    max_segments=item["max_segments"],
                )
                for segment in segments:
                    rows.append((item["source"], item["label"], item["split"], segment))
                    if len(rows) >= ROWS_PER_OUTPUT_TABLE:
                        yield segments_to_table(rows, self.preset.n_mels)
                        rows = []
            except Exception as error:  # noqa: BLE001 - one odd file must not abort a long run
                # Recorded with its message (rejected.jsonl or partial_inputs), never dropped.
                reason = f"unexpected error ({type(error).__name__}: {error})"
                if outcome.num_segments:
                    outcome.partial_reason = reason
                else:
                    outcome.rejection_kind, outcome.rejection_reason = "unexpected error", reason
            where = {key: item[key] for key in ("source", "range_index", "num_ranges", "range_start_s")}
            outcomes.append({**where, **vars(outcome)})
        if rows:
            yield segments_to_table(rows, self.preset.n_mels)
        if self.ledger is not None:
            # Not waited on, so no task ever stalls on the ledger (it may still be starting); the
            # driver waits until the ledger has heard of every file before it reads the summary.
            self.ledger.report.remote(outcomes)
