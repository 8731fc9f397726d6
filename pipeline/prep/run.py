"""The prep flow behind `python -m pipeline.prep`: raw audio -> Parquet log-mel shards, on Ray Data.

Flow: list inputs on the driver (folders, buckets, manifests, tar shards: `pipeline.audio.inputs`) ->
(optional) seeded nested subset -> long files split into time ranges (`pipeline.prep.ranges`) -> Ray
Data: one task per batch of files and ranges -> decode, 16 kHz mono, log-mel per segment -> the
task writes the batch's part file and its progress record (`pipeline.prep.progress`: a run cut short
continues where it stopped) -> statistics, rejected.jsonl and manifest.json on the driver. Exit status: 0 when at least one input produced rows (or a finished
identical run was reused), 1 when none did, 2 for a usage error (bad input path, output conflict).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import sys
import time
from pathlib import Path

from pipeline.audio.frontend import PRESETS, get_preset
from pipeline.audio.input_file import InputFile, InputListing, InputListingError
from pipeline.audio.inputs import list_inputs, select_subset_hours
from pipeline.cli.flags import filled_by_program, flag
from pipeline.prep import debug_hooks, progress
from pipeline.prep.lock import output_lock
from pipeline.prep.output import (
    build_manifest,
    compute_fingerprint,
    compute_row_statistics,
    prepare_output_dir,
    write_manifest,
    write_rejected,
)
from pipeline.prep.placement import task_placement
from pipeline.prep.ranges import DEFAULT_MAX_RANGE_S, WorkItem, plan_work_items
from pipeline.session.ray_session import connect_ray
from pipeline.shards.format import read_manifest
from pipeline.shards.location import is_uri, locate_shards
from pipeline.storage.bucket_check import check_bucket, without_query
from pipeline.storage.writable import check_writable_dir

# Enough batches per CPU to balance uneven file lengths, few enough that per-task overhead vanishes.
BATCHES_PER_CPU = 4
MAX_FILES_PER_BATCH = 64
# A task's Parquet part is assembled in memory before it is written, so a batch is also capped by
# the bytes of its input files (256 MB of 16-bit 16 kHz WAV is ~2.2 h of audio, ~130 MB of mel).
MAX_BATCH_INPUT_BYTES = 256 * 1024**2


def _show_progress_unless(no_progress: bool) -> bool:
    return not no_progress


@dataclasses.dataclass(frozen=True, kw_only=True)
class PrepConfig:
    """One prep run; each field declared once with its `python -m pipeline.prep` flag (pipeline.cli.flags)."""

    # A folder or file (made an absolute Path below) or a bucket URI (kept as the str given).
    input_path: str = flag(
        "--input", None,
        "audio: a folder, a bucket prefix (s3://BUCKET/PATH), a .csv/.jsonl manifest, or WebDataset .tar shards",
        required=True,
    )  # fmt: skip
    # A folder (made an absolute Path below) or a bucket URI (kept as the str given).
    output_dir: str = flag(
        "--output", None, "shard directory to write: a folder, or a bucket (s3://BUCKET/PATH)", required=True
    )
    preset_name: str = flag(
        "--preset", "audiomae", "front end: log-mel presets, or `waveform` (16 kHz samples in 20 ms frames)",
        choices=sorted(PRESETS),
    )  # fmt: skip
    segment_s: float = flag("--segment-s", 10.0, "longest segment (row), seconds")
    max_hours: float | None = flag("--max-hours", None, "seeded, nested subset of about H hours")
    seed: int = flag("--seed", 0, "seed of the --max-hours subset")
    ray_address: str | None = flag("--address", None, "Ray cluster address (default: start a local Ray)")
    overwrite: bool = flag("--overwrite", False, "replace shards made with other settings")
    show_progress: bool = flag(
        "--no-progress", True, "no progress bar", action="store_true", to_field=_show_progress_unless
    )
    # Files longer than this are split into time ranges handled by different tasks; it bounds a
    # task's memory, not the rows (they are the same for any value), so it is not a setting.
    max_range_s: float = filled_by_program(DEFAULT_MAX_RANGE_S)

    def __post_init__(self) -> None:
        if self.input_path is None or self.output_dir is None:
            raise ValueError("prep needs --input (audio directory or manifest) and --output (the shard directory)")
        # The lock, the manifest and a reused run name the folder the same way from any working directory;
        # a bucket URI stays as given (a path join would turn it into a local folder named `s3:`).
        if not is_uri(self.output_dir):
            object.__setattr__(self, "output_dir", Path(self.output_dir).expanduser().absolute())
        if not is_uri(self.input_path):
            object.__setattr__(self, "input_path", Path(self.input_path).expanduser().absolute())

    def settings(self) -> dict:
        """What decides the rows; recorded in the manifest and hashed into the fingerprint."""
        return {
            "preset": self.preset_name,
            "segment_s": self.segment_s,
            "max_hours": self.max_hours,
            "seed": self.seed if self.max_hours is not None else None,
        }


@dataclasses.dataclass(kw_only=True)
class PrepResult:
    output_dir: Path | str
    manifest: dict
    reused: bool
    elapsed_s: float

    @property
    def exit_code(self) -> int:
        return 0 if self.manifest["num_rows"] > 0 else 1


def files_per_batch(inputs: list[InputFile] | list[WorkItem], num_cpus: float) -> int:
    """Files (or work items) handed to one task: balanced across CPUs, bounded in count and in input bytes."""
    by_balance = math.ceil(len(inputs) / max(1.0, BATCHES_PER_CPU * num_cpus))
    mean_bytes = sum(item.size_bytes for item in inputs) / max(1, len(inputs))
    by_memory = int(MAX_BATCH_INPUT_BYTES // max(mean_bytes, 1.0))
    return max(1, min(MAX_FILES_PER_BATCH, by_balance, by_memory))


@dataclasses.dataclass(frozen=True)
class Batch:
    """Consecutive work items [first_item, first_item + len(items)): one task, one part file."""

    first_item: int
    items: list[dict]  # WorkItem.row of each


def _batches(work: list[WorkItem], batch_items: int, segment_s: float) -> list[Batch]:
    rows = [item.row(segment_s) for item in work]
    return [Batch(first, rows[first : first + batch_items]) for first in range(0, len(rows), batch_items)]


def _resume_or_start(location, *, fingerprint: str, work: list[WorkItem], num_cpus: float) -> tuple[int, dict]:
    """(items per batch, the batches already recorded): a run of this fingerprint that was cut short
    continues with its own batch size; anything else starts from nothing."""
    plan = progress.read_plan(location)
    if plan is not None and plan.get("fingerprint") == fingerprint and plan.get("num_items") == len(work):
        records = progress.finished_records(location)
        progress.remove_unrecorded_parts(location, records)
        return int(plan["batch_items"]), records
    batch_items = files_per_batch(work, num_cpus)
    progress.remove_unrecorded_parts(location, {})
    progress.start_plan(location, {"fingerprint": fingerprint, "num_items": len(work), "batch_items": batch_items})
    return batch_items, {}


class FilesBar:
    """One progress bar counted in input files, with the hours of audio made so far; redrawn at most every
    2 s, so a log file (no terminal) gets a few lines, not hundreds. `shown` False: silent."""

    def __init__(self, total: int, *, shown: bool, start: tuple[int, float] = (0, 0.0)) -> None:
        self.total, self.shown, self.start = total, shown, start

    def __enter__(self) -> FilesBar:
        from tqdm import tqdm

        if self.shown:
            self.bar = tqdm(total=self.total, unit="file", desc="prep", file=sys.stderr, mininterval=2.0)
            self.update(self.start)
        return self

    def update(self, files_and_audio_s: tuple[int, float]) -> None:
        if self.shown:
            done, audio_s = files_and_audio_s
            self.bar.set_postfix_str(f"{audio_s / 3600:.2f} h of audio", refresh=False)
            self.bar.update(done - self.bar.n)

    def __exit__(self, *exc) -> None:
        if self.shown:
            self.bar.close()


def described_input(input_path: str | Path) -> str:
    """The input as the manifest records it: an absolute path, or a URI without its options."""
    return without_query(str(input_path)) if is_uri(input_path) else str(Path(input_path).absolute())


def _run_batches(config: PrepConfig, batches: list[Batch], placement: dict, on_record) -> None:
    """Featurize `batches` on Ray Data, one task each; `on_record` gets each batch's record as it lands."""
    import ray

    from pipeline.prep.featurize import FeaturizeBatches

    if not batches:
        return
    rows = [{"first_item": batch.first_item, "items": json.dumps(batch.items)} for batch in batches]
    context = ray.data.DataContext.get_current()
    shows_bars, reserves = context.enable_progress_bars, context.op_resource_reservation_enabled
    context.enable_progress_bars = False  # prep draws one bar counted in input files instead
    # One map operator; the per-operator reservation only delayed the second task until the first
    # had finished (bench_prep: the second core idled ~1 s per run). A dataset takes a copy of the
    # context when it is made, so both are set before it is.
    context.op_resource_reservation_enabled = False
    try:
        results = ray.data.from_items(rows, override_num_blocks=len(rows)).map_batches(
            FeaturizeBatches(
                preset_name=config.preset_name, segment_s=config.segment_s, output_dir=str(config.output_dir)
            ),
            batch_format="pyarrow",
            batch_size=1,
            # Tasks, not an actor pool: nothing holds a CPU while idle, so the 2-core deadlock of a
            # pool starving its own input cannot happen.
            num_cpus=1,
            **placement,
        )
        for result in results.iter_rows():
            on_record(json.loads(result["record"]))
    finally:
        context.enable_progress_bars, context.op_resource_reservation_enabled = shows_bars, reserves


def _featurize_on_ray(config: PrepConfig, readable: list[InputFile], fingerprint: str) -> tuple[dict, list[dict]]:
    """Write the part files of `readable` on Ray (connected by pipeline.session.ray_session's policy, shut
    down again if this call started it), continuing a run of this fingerprint that was cut short.
    Returns the ledger's summary (the inputs rejected, those featurized in part, the seconds of tail
    audio dropped) and the manifest records of the part files."""
    import ray

    from pipeline.prep.ledger import PrepLedger

    started_ray = connect_ray(config.ray_address)
    try:
        work = plan_work_items(readable, segment_s=config.segment_s, max_range_s=config.max_range_s)
        location = locate_shards(config.output_dir)
        batch_items, done = _resume_or_start(
            location, fingerprint=fingerprint, work=work, num_cpus=ray.cluster_resources().get("CPU", 1.0)
        )
        ledger, records = PrepLedger(), dict(done)
        for record in done.values():
            ledger.report(record["outcomes"])
        batches = _batches(work, batch_items, config.segment_s)
        if done:
            print(
                f"prep: continuing a run that was cut short: {len(done)} of {len(batches)} batches were done "
                f"({ledger.progress()[0]} of {len(readable)} files); featurizing the other {len(batches) - len(done)}",
                file=sys.stderr,
            )

        def on_record(record: dict) -> None:
            records[record["first_item"]] = record
            ledger.report(record["outcomes"])
            bar.update(ledger.progress())
            debug_hooks.maybe_kill_driver(len(records) - len(done))

        with FilesBar(len(readable), shown=config.show_progress, start=ledger.progress()) as bar:
            remaining = [batch for batch in batches if batch.first_item not in done]
            _run_batches(config, remaining, task_placement(config.output_dir, readable), on_record)
    finally:
        if started_ray:
            ray.shutdown()
    parts = [record["part"] for _, record in sorted(records.items()) if record.get("part")]
    return ledger.summary(), parts


def run_prep(config: PrepConfig) -> PrepResult:
    """Run the prep stage; reuses a finished identical output."""
    started = time.monotonic()
    get_preset(config.preset_name)  # an unknown preset fails before anything is listed or locked
    if config.segment_s <= 0:
        raise InputListingError(f"--segment-s must be positive, got {config.segment_s}")
    # Before the inputs are listed and decoded: a folder must take a file, a bucket a write.
    if is_uri(config.output_dir):
        check_bucket(str(config.output_dir), what="--output", write=True)
    else:
        check_writable_dir(config.output_dir, what="--output")
    listing = list_inputs(config.input_path)
    selected = listing.inputs
    if config.max_hours is not None:
        selected = select_subset_hours(listing.inputs, max_hours=config.max_hours, seed=config.seed)
    # A bucket has no lock: two preps into one bucket prefix at once are not guarded (docs/failure-modes.md).
    with contextlib.nullcontext() if is_uri(config.output_dir) else output_lock(config.output_dir):
        return _prep_locked(config, listing, selected, started)


def _prep_locked(config: PrepConfig, listing: InputListing, selected: list[InputFile], started: float) -> PrepResult:
    """The rest of `run_prep`, with the output folder's lock held (`pipeline.prep.lock`)."""
    preset = get_preset(config.preset_name)
    settings = config.settings()
    fingerprint = compute_fingerprint(settings, selected)
    if prepare_output_dir(config.output_dir, fingerprint=fingerprint, settings=settings, overwrite=config.overwrite):
        return PrepResult(
            output_dir=config.output_dir,
            manifest=read_manifest(config.output_dir),
            reused=True,
            elapsed_s=time.monotonic() - started,
        )

    # Inputs that cannot even be opened are rejected here; the rest go to Ray.
    rejected = [{"path": i.source, "kind": i.problem_kind, "reason": i.problem} for i in selected if i.problem]
    readable = [i for i in selected if not i.problem]
    partial, dropped_tail_s, silent = [], 0.0, []
    part_files = []
    if readable:
        ledger_summary, part_files = _featurize_on_ray(config, readable, fingerprint)
        rejected += ledger_summary["rejected"]
        partial, dropped_tail_s = ledger_summary["partial"], ledger_summary["dropped_tail_s"]
        silent = ledger_summary["silent"]

    stats = compute_row_statistics(config.output_dir, preset.n_mels)
    rejected = _account_for_every_input(readable, stats.sources, rejected)
    write_rejected(config.output_dir, rejected)
    manifest = build_manifest(
        fingerprint=fingerprint,
        settings=settings,
        preset=preset.to_dict(),
        input_path=described_input(config.input_path),
        num_listed=len(listing.inputs),
        num_inputs=len(selected),
        stats=stats,
        rejected=rejected,
        partial=partial,
        dropped_tail_s=dropped_tail_s,
        silent=silent,
        skipped_non_audio=listing.skipped_non_audio,
        skipped_symlink_loops=listing.skipped_symlink_loops,
        part_files=part_files,
        elapsed_s=time.monotonic() - started,
    )
    write_manifest(config.output_dir, manifest)
    progress.clear_progress(locate_shards(config.output_dir))
    return PrepResult(
        output_dir=config.output_dir, manifest=manifest, reused=False, elapsed_s=time.monotonic() - started
    )


def _account_for_every_input(readable: list[InputFile], sources: set[str], rejected: list[dict]) -> list[dict]:
    """The invariant: each input is a row source or rejected. Any file a failed worker lost without
    a report is rejected here rather than vanishing."""
    accounted = sources | {record["path"] for record in rejected}
    lost = [
        {"path": i.source, "kind": "lost", "reason": "no rows and no reason reported (a worker failed?); re-run"}
        for i in readable
        if i.source not in accounted
    ]
    return [record for record in rejected if record["path"] not in sources] + lost
