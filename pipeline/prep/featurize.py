"""The prep stage's Ray Data UDF: one batch of work items -> its part file, its progress record, and
what became of each item.

An item is a whole file or a time range of a long one (`pipeline.prep.ranges`), on this machine, in a
bucket or inside a tar shard (`pipeline.audio.input_bytes`). One call handles one batch (`files_per_batch`
in prep.py), so Ray's per-task overhead is paid per batch, not per file, and rows are built as Arrow
tables from whole numpy buffers, not per-row Python dicts. The task writes the batch's part itself,
then its record (`pipeline.prep.progress`): a killed prep continues from the batches recorded. The
outcomes go back to the driver as the task's output rows, where prep accounts for every input.
"""

from __future__ import annotations

import json

import pyarrow as pa
import ray
import torch

from pipeline.audio.frontend import get_preset
from pipeline.audio.input_bytes import InputLocation
from pipeline.audio.segments import FileOutcome, featurize_file
from pipeline.prep import debug_hooks, progress
from pipeline.shards.format import segments_to_table
from pipeline.shards.location import locate_shards

# About 16 MB of float16 mel per row group (100 ten-second segments of 80 bins).
ROWS_PER_OUTPUT_TABLE = 100


class FeaturizeBatches:
    """Callable for `map_batches(batch_size=1, batch_format="pyarrow")` over rows {"first_item",
    "items": JSON list of `WorkItem.row`}; returns rows {"first_item", "record": JSON}."""

    def __init__(self, *, preset_name: str, segment_s: float, output_dir: str, torch_threads: int = 1):
        self.torch_threads = torch_threads
        self.preset = get_preset(preset_name)
        self.segment_s = segment_s
        self.output_dir = str(output_dir)

    def __call__(self, batches: pa.Table) -> pa.Table:
        # One torch thread per worker, set here in the worker (not in the driver that builds this
        # object): parallelism comes from Ray's processes; more threads would only contend.
        torch.set_num_threads(self.torch_threads)
        location = locate_shards(self.output_dir)
        results = []
        for batch in batches.to_pylist():
            debug_hooks.maybe_delay_batch()
            tables, outcomes = self.featurize_items(json.loads(batch["items"]))
            record = {
                "first_item": batch["first_item"],
                "part": progress.write_part(location, batch["first_item"], tables, self.preset.n_mels),
                "outcomes": outcomes,
                "node": ray.get_runtime_context().get_node_id(),  # which node read these inputs
            }
            progress.write_record(location, record)
            results.append({"first_item": batch["first_item"], "record": json.dumps(record)})
        return pa.Table.from_pylist(results)

    def featurize_items(self, items: list[dict]) -> tuple[list[pa.Table], list[dict]]:
        """The items' rows as tables of up to ROWS_PER_OUTPUT_TABLE rows, and one outcome per item."""
        tables, rows, outcomes = [], [], []
        for item in items:
            outcome = FileOutcome()
            location = InputLocation(path=item["path"], member_offset=item["member_offset"],
                                     member_size=item["member_size"])  # fmt: skip
            try:
                segments = featurize_file(
                    location, self.preset, self.segment_s, outcome,
                    first_segment=item["first_segment"], max_segments=item["max_segments"],
                )  # fmt: skip
                for segment in segments:
                    rows.append((item["source"], item["label"], item["split"], segment))
                    if len(rows) >= ROWS_PER_OUTPUT_TABLE:
                        tables.append(segments_to_table(rows, self.preset.n_mels))
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
            tables.append(segments_to_table(rows, self.preset.n_mels))
        return tables, outcomes
