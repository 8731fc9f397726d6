"""The training stream: each rank's share of every epoch, fresh crops per epoch, exact resume, read-ahead."""

from __future__ import annotations

import hashlib
import itertools

import numpy as np
import pyarrow.parquet as pq
import pytest
import torch

from pipeline.pretrain.data import MicroBatches, normalise_on_device
from pipeline.pretrain.data_position import implied_position, resume_position
from pipeline.shards.crop_stream import CropStream, StreamPlan, StreamPosition, batches
from pipeline.shards.crops import crop_policy
from pipeline.shards.format import part_files, read_manifest, read_shard_table
from pipeline.shards.holdout import held_out
from tests.support.prep_helpers import labeled_shards

CROP = 100  # frames; every segment of the fixture (81..501 frames) is at least half of it


@pytest.fixture(scope="module")
def shards(tmp_path_factory):
    return labeled_shards(tmp_path_factory)


def digests(crops: np.ndarray) -> list[str]:
    return [hashlib.sha1(crop.tobytes()).hexdigest()[:12] for crop in crops]


def epoch_crops(shards, *, seed: int, rank: int, world_size: int, epoch: int = 0, window: int = 3) -> np.ndarray:
    plan = StreamPlan(str(shards), crop_frames=CROP, seed=seed, rank=rank, world_size=world_size)
    stream = batches(CropStream(plan, window_rows=window), batch_size=plan.rows_per_epoch,
                     start=StreamPosition(epoch, 0))  # fmt: skip
    return next(stream)[0].normalised()


def all_crops_of_epoch(shards, seed: int, epoch: int) -> list[str]:
    """Every row's crop of `epoch` (crop seed = seed + epoch), however the ranks split it."""
    policy = crop_policy(read_manifest(shards), crop_frames=CROP, seed=seed + epoch)
    return digests(np.concatenate([policy(pq.read_table(path))["mel"] for path in part_files(shards)]))


def test_two_ranks_read_disjoint_equal_shares_of_every_epoch(shards):
    everything = all_crops_of_epoch(shards, seed=4, epoch=0)
    assert len(everything) == 8
    shares = [digests(epoch_crops(shards, seed=4, rank=rank, world_size=2)) for rank in (0, 1)]
    assert len(shares[0]) == len(shares[1]) == 4
    assert sorted(shares[0] + shares[1]) == sorted(everything)
    three = [digests(epoch_crops(shards, seed=4, rank=rank, world_size=3)) for rank in range(3)]
    assert [len(share) for share in three] == [2, 2, 2]  # 8 rows: 2 sit the epoch out
    assert len(set(itertools.chain(*three))) == 6 and set(itertools.chain(*three)) <= set(everything)


def test_each_epoch_crops_afresh_in_its_own_file_order(shards):
    assert sum(1 for path in part_files(shards) if pq.read_metadata(path).num_rows) >= 3
    first, second = (epoch_crops(shards, seed=4, rank=0, world_size=1, epoch=epoch, window=1) for epoch in (0, 1))
    assert sorted(digests(first)) == sorted(all_crops_of_epoch(shards, seed=4, epoch=0))
    assert sorted(digests(second)) == sorted(all_crops_of_epoch(shards, seed=4, epoch=1))
    # Fresh crops: only the 81-frame segment (padded, so one possible crop) must repeat; the 121-frame one
    # repeats with chance 1/22.
    assert len(set(digests(first)) & set(digests(second))) <= 2
    plans = [StreamPlan(str(shards), crop_frames=CROP, seed=4, rank=0, world_size=1) for _ in range(2)]
    orders = {tuple(plans[0].epoch_rows(epoch)[0].tolist()) for epoch in range(6)}
    assert len(orders) >= 2  # epochs read the files in different orders
    assert [plans[0].epoch_rows(e)[0].tolist() for e in range(6)] == [
        plans[1].epoch_rows(e)[0].tolist() for e in range(6)
    ]


def test_a_stream_started_at_any_saved_position_continues_identically(shards):
    plan = StreamPlan(str(shards), crop_frames=CROP, seed=1, rank=1, world_size=2)
    uninterrupted = list(
        itertools.islice(batches(CropStream(plan, window_rows=3), batch_size=3, start=StreamPosition()), 12)
    )
    assert uninterrupted[-1][1] == StreamPosition(9, 0)  # 36 crops of 4 per epoch
    for cut in (1, 4, 7):
        resumed = batches(CropStream(plan, window_rows=3), batch_size=3, start=uninterrupted[cut - 1][1])
        for (expected, position), (crop, resumed_position) in zip(uninterrupted[cut:], resumed):
            np.testing.assert_array_equal(crop.normalised(), expected.normalised())
            assert resumed_position == position


def test_holdout_clips_never_reach_the_stream(shards):
    clips = read_shard_table(shards, columns=["clip_id"])["clip_id"].to_pylist()
    validation = {clip for clip, out in zip(clips, held_out(clips, 0.3)) if out}
    assert 0 < len(validation) < len(clips), "the fraction must hold out some clips and keep others"
    plan = StreamPlan(str(shards), crop_frames=CROP, seed=0, rank=0, world_size=1, holdout=("train", 0.3))
    assert plan.rows_per_epoch == len(clips) - len(validation)


def test_fewer_usable_segments_than_workers_is_an_error_naming_them(shards):
    with pytest.raises(ValueError, match=r"8 segment\(s\) long enough .* fewer than the 9 workers"):
        StreamPlan(str(shards), crop_frames=CROP, seed=0, rank=0, world_size=9)


def test_micro_batches_read_ahead_and_track_the_position(shards):
    plan = StreamPlan(str(shards), crop_frames=CROP, seed=2, rank=0, world_size=1)
    expected = list(itertools.islice(batches(CropStream(plan, window_rows=5), batch_size=3, start=StreamPosition()), 6))
    micro = MicroBatches(plan, micro_batch_size=3, window_rows=5, device=torch.device("cpu"), start=StreamPosition())
    try:
        for crops, position in expected:
            batch = next(micro)
            assert batch.dtype == torch.float32 and tuple(batch.shape) == (3, CROP, 80)
            np.testing.assert_array_equal(batch.numpy(), crops.normalised())
            assert micro.position == position
    finally:
        micro.close()


def test_crops_normalised_where_they_land_equal_the_policy_s_own(shards):
    """On a GPU the float16 crops are normalised and padded on the device: the same numbers (torch, CPU here)."""
    policy = crop_policy(read_manifest(shards), crop_frames=300, seed=5)  # rows of 81..501 frames: some padded
    raw = policy.crop_raw(read_shard_table(shards))
    assert raw.mel.dtype == np.float16 and (raw.valid < 300).sum() >= 2
    on_device = normalise_on_device(raw, torch.device("cpu")).numpy()
    np.testing.assert_allclose(on_device, raw.normalised(), rtol=1e-6, atol=1e-6)
    short = int(np.argmin(raw.valid))
    assert np.all(on_device[short, raw.valid[short] :] == raw.pad[short])


def test_a_read_error_in_the_reader_thread_reaches_the_training_thread(shards, tmp_path):
    copy = tmp_path / "shards"
    copy.mkdir()
    for path in shards.iterdir():
        (copy / path.name).write_bytes(path.read_bytes())
    plan = StreamPlan(str(copy), crop_frames=CROP, seed=2, rank=0, world_size=1)
    for path in copy.glob("part-*.parquet"):
        path.write_bytes(b"not parquet")  # damaged after the run started
    micro = MicroBatches(plan, micro_batch_size=3, window_rows=5, device=torch.device("cpu"), start=StreamPosition())
    try:
        with pytest.raises(Exception, match="(?i)parquet|magic|corrupt"):
            next(micro)
    finally:
        micro.close()


def test_resume_position_prefers_the_record_and_explains_a_fallback():
    said = []
    record = {"epoch": 2, "offset": 5, "world_size": 2}  # 7 steps x 4 crops = 28 = 2 epochs of 11 + 6: not 5
    assert resume_position(record, step=7, world_size=2, crops_per_step=4, rows_per_epoch=11,
                           say=said.append) == StreamPosition(2, 5)  # fmt: skip
    assert "differs from" in said[-1]
    said.clear()
    exact = resume_position({"epoch": 2, "offset": 6, "world_size": 2}, step=7, world_size=2, crops_per_step=4,
                            rows_per_epoch=11, say=said.append)  # fmt: skip
    assert exact == StreamPosition(2, 6) == implied_position(7, crops_per_step=4, rows_per_epoch=11) and not said
    moved = resume_position(record, step=7, world_size=4, crops_per_step=4, rows_per_epoch=11, say=said.append)
    assert moved == StreamPosition(2, 6) and "2 worker(s), this run has 4" in said[-1]
    assert resume_position(None, step=7, world_size=2, crops_per_step=4, rows_per_epoch=11, say=said.append) == moved
    assert "no data position" in said[-1]


def test_no_shuffle_reads_the_rows_in_the_epochs_file_order(shards):
    plan = StreamPlan(str(shards), crop_frames=CROP, seed=4, rank=0, world_size=1)
    crops = next(batches(CropStream(plan, window_rows=0), batch_size=8, start=StreamPosition()))[0].normalised()
    files, rows = plan.epoch_rows(0)
    policy = crop_policy(read_manifest(shards), crop_frames=CROP, seed=4)
    tables = [pq.read_table(plan.paths[file]).slice(row, 1) for file, row in zip(files.tolist(), rows.tolist())]
    np.testing.assert_array_equal(crops, np.concatenate([policy.crop(table) for table in tables]))
