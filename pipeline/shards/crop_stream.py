"""Each training worker's own stream of crops: deterministic, and resumable from a saved position.

Why not Ray Data's streaming split: its splitter hands blocks to whichever worker asks first
("OutputSplitter does not provide any ordering guarantees", ray/data/_internal/execution/operators/
output_splitter.py in Ray 2.60), so two runs of one configuration see different crops and a resumed run
cannot see what an uninterrupted one would have. Here the order is a pure function of (shards, seed,
rank, world size, window):
- Epoch e reads the part files in the order `random.Random(seed + e)` shuffles them to, and crops each
  segment with seed + e (`pipeline.shards.crops`: fresh crops every epoch).
- The epoch's rows that give a training crop (long enough, on the training side of the holdout), in
  that order, are cut into `world_size` equal contiguous ranges (the remainder, fewer than world_size
  rows, sits that epoch out); rank r reads range r, about 1/world_size of the bytes.
- A range is read in windows of `window_rows` rows, each window's crops shuffled by a generator seeded
  with (seed, epoch, rank, window): the mixing of a shuffle buffer with no buffer to save.
Every rank takes the same number of crops per step, so one `StreamPosition` (epoch, crops taken in it)
says where every rank stands; the checkpoint stores it and a resumed run starts exactly there.
No Ray here: plain pyarrow, so it reads a local folder or a bucket (`pipeline.shards.location`).
"""

from __future__ import annotations

import dataclasses
import random
from collections import OrderedDict
from collections.abc import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from pipeline.shards.crops import RawCrops, crop_policy
from pipeline.shards.format import checked_part_names, read_manifest
from pipeline.shards.location import locate_shards

OPEN_PARTS = 16  # part files kept open per reader: a window's rows come from a few files at a time
UNSHUFFLED_WINDOW_ROWS = 256  # rows read at once when nothing is shuffled: per-window costs amortised


@dataclasses.dataclass(frozen=True)
class StreamPosition:
    """Where a rank's stream stands: `offset` crops of epoch `epoch` already taken."""

    epoch: int = 0
    offset: int = 0

    def advanced(self, crops: int, rows_per_epoch: int) -> StreamPosition:
        total = self.offset + crops
        return StreamPosition(self.epoch + total // rows_per_epoch, total % rows_per_epoch)


class StreamPlan:
    """Which rows of which part files a rank reads in each epoch (read once: clip ids and lengths)."""

    def __init__(
        self,
        shard_dir: str,
        *,
        crop_frames: int,
        seed: int,
        rank: int,
        world_size: int,
        holdout: tuple[str | None, float] = (None, 0.0),
        min_frames: int | None = None,
    ) -> None:
        manifest = read_manifest(shard_dir)
        self.location = locate_shards(shard_dir)
        self.paths = [self.location.child_path(name) for name in checked_part_names(shard_dir, manifest)]
        self.policy = crop_policy(manifest, crop_frames=crop_frames, seed=seed, min_frames=min_frames)
        self.policy.holdout = holdout
        self.seed, self.rank, self.world_size = seed, rank, world_size
        self.kept: list[np.ndarray] = []  # per file: the row numbers that give a training crop
        self.row_group_starts: list[np.ndarray] = []  # per file: first row of each row group, and the end
        # Each file's footer and size, read once: a window's row group is then one ranged read of its
        # column chunks (in a bucket, one GET), not a HEAD, a footer GET and a GET every time.
        self.metadata: list[pq.FileMetaData] = []
        self._open: OrderedDict[int, pq.ParquetFile] = OrderedDict()
        for path in self.paths:
            parquet = pq.ParquetFile(path, filesystem=self.location.filesystem)
            self.metadata.append(parquet.metadata)
            index = parquet.read(columns=["clip_id", "num_frames"])
            self.kept.append(np.flatnonzero(self.policy.kept_rows(index)))
            sizes = [parquet.metadata.row_group(i).num_rows for i in range(parquet.metadata.num_row_groups)]
            self.row_group_starts.append(np.concatenate([[0], np.cumsum(sizes, dtype=np.int64)]))
        total = sum(len(rows) for rows in self.kept)
        self.rows_per_epoch = total // world_size
        if self.rows_per_epoch == 0:
            raise ValueError(
                f"{shard_dir} has {total} segment(s) long enough for {crop_frames}-frame crops, fewer than the "
                f"{world_size} workers: add audio, shorten the crop or use fewer workers"
            )

    def open_part(self, file_index: int) -> pq.ParquetFile:
        """Part file `file_index` with its footer already known, its column chunks read together; the last
        OPEN_PARTS stay open (in a bucket, opening a file is a HEAD request)."""
        if file_index in self._open:
            self._open.move_to_end(file_index)
            return self._open[file_index]
        source = self.location.filesystem.open_input_file(self.paths[file_index])
        self._open[file_index] = pq.ParquetFile(source, metadata=self.metadata[file_index], pre_buffer=True)
        while len(self._open) > OPEN_PARTS:
            self._open.popitem(last=False)[1].close()
        return self._open[file_index]

    def epoch_rows(self, epoch: int) -> tuple[np.ndarray, np.ndarray]:
        """(file index, row number) of each of this rank's rows in `epoch`, in reading order."""
        order = list(range(len(self.paths)))
        random.Random(self.seed + epoch).shuffle(order)
        files = np.concatenate([np.full(len(self.kept[i]), i, np.int64) for i in order])
        rows = np.concatenate([self.kept[i] for i in order])
        mine = slice(self.rank * self.rows_per_epoch, (self.rank + 1) * self.rows_per_epoch)
        return files[mine], rows[mine]


class CropStream:
    """A rank's endless crops from a `StreamPlan`, in windows; see the module docstring."""

    def __init__(self, plan: StreamPlan, *, window_rows: int) -> None:
        """`window_rows` 0: no shuffle, the rows in reading order (read in windows of UNSHUFFLED_WINDOW_ROWS)."""
        self.plan = plan
        self.shuffle = window_rows > 0
        self.window_rows = int(window_rows) if self.shuffle else UNSHUFFLED_WINDOW_ROWS
        self._decoded: dict[tuple[int, int], pa.Table] = {}  # the row groups of the last window read

    def windows(self, start: StreamPosition) -> Iterator[tuple[RawCrops, StreamPosition]]:
        """(crops as stored, with their normalisation; position of the first of them), from `start` on."""
        epoch, skip = start.epoch, start.offset
        while True:
            files, rows = self.plan.epoch_rows(epoch)
            first_window = skip // self.window_rows
            for begin in range(first_window * self.window_rows, len(rows), self.window_rows):
                crops = self._window(epoch, begin // self.window_rows, files[begin : begin + self.window_rows],
                                     rows[begin : begin + self.window_rows])  # fmt: skip
                drop = max(0, skip - begin)
                yield crops.take(slice(drop, None)), StreamPosition(epoch, begin + drop)
            epoch, skip = epoch + 1, 0

    def _window(self, epoch: int, window: int, files: np.ndarray, rows: np.ndarray) -> RawCrops:
        policy = self.plan.policy.with_seed(self.plan.seed + epoch)
        parts, decoded = [], {}
        for file_index in dict.fromkeys(files.tolist()):  # files in reading order, each once
            wanted = rows[files == file_index]
            table = self._rows(file_index, wanted, decoded)
            parts.append(policy.crop_raw(table))
        self._decoded = decoded
        crops = RawCrops.concatenate(parts)
        if not self.shuffle:
            return crops
        permutation = np.random.default_rng([self.plan.seed, epoch, self.plan.rank, window]).permutation(len(crops))
        return crops.take(permutation)

    def _rows(self, file_index: int, wanted: np.ndarray, decoded: dict) -> pa.Table:
        """Rows `wanted` (ascending) of one part file, decoding only the row groups that hold them."""
        starts = self.plan.row_group_starts[file_index]
        groups = np.unique(np.searchsorted(starts, wanted, side="right") - 1)
        tables = []
        for group in groups.tolist():
            key = (file_index, group)
            if key not in decoded:
                decoded[key] = (
                    self._decoded[key]
                    if key in self._decoded
                    else self.plan.open_part(file_index).read_row_group(group, columns=self.plan.policy.columns())
                )
            tables.append(decoded[key])
        local = wanted - starts[groups[0]] if len(groups) == 1 else _local_rows(wanted, starts, groups)
        return pa.concat_tables(tables).take(pa.array(local))


def _local_rows(wanted: np.ndarray, starts: np.ndarray, groups: np.ndarray) -> np.ndarray:
    """Row numbers of `wanted` within the concatenation of row groups `groups` (ascending)."""
    sizes = starts[groups + 1] - starts[groups]
    concatenated_start = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    group_of_row = np.searchsorted(starts, wanted, side="right") - 1
    return wanted - starts[group_of_row] + concatenated_start[np.searchsorted(groups, group_of_row)]


def batches(stream: CropStream, *, batch_size: int, start: StreamPosition) -> Iterator[tuple[RawCrops, StreamPosition]]:
    """(`batch_size` crops, the position after them; `RawCrops.normalised()` gives float32 (batch_size,
    crop_frames, n_mels)): batches run across windows and epochs, so no crop is dropped, every batch full."""
    rows_per_epoch = stream.plan.rows_per_epoch
    pending: list[RawCrops] = []
    count, position = 0, start
    for crops, _ in stream.windows(start):
        pending.append(crops)
        count += len(crops)
        while count >= batch_size:
            merged = RawCrops.concatenate(pending)
            batch, rest = merged.take(slice(0, batch_size)), merged.take(slice(batch_size, None))
            position = position.advanced(batch_size, rows_per_epoch)
            yield batch, position
            pending, count = [rest], len(rest)
