"""The data side of pretraining: which crops the workers stream, and the RankMe pool.

Fresh crops every epoch: `crop_dataset` draws one crop per segment from (seed, clip id), so a
dataset re-read with the same seed repeats its crops. One training pass therefore holds
`epochs_per_pass` epochs cropped with seeds seed, seed+1, ...: enough epochs that one pass covers
every step of the run (capped; a longer run starts the pass again). Segments are 10 s and crops
2 s in the default setup, so fixed crops would leave most of every segment unseen.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import torch

from pipeline.pretrain.config import PretrainConfig
from pipeline.shards.crops import crop_dataset, read_crops
from pipeline.shards.format import read_manifest
from pipeline.shards.rankme_pool import RankMePool, select_pool

MAX_EPOCHS_PER_PASS = 16
VALIDATION_SEED = 3_000_017  # the validation crops' own fixed sample, independent of the training seed


class ShardMismatchError(ValueError):
    """The shards were made with a front end the model was not built for."""


def check_shards_match_model(shards_dir: str, manifest: dict[str, Any], model_spec: Any) -> None:
    """Refuse shards whose preset / mel bins differ from what the model expects."""
    preset_name = manifest.get("preset", {}).get("name")
    if preset_name != model_spec.frontend_preset or int(manifest["n_mels"]) != model_spec.n_mels:
        raise ShardMismatchError(
            f"shards {shards_dir} hold {manifest['n_mels']}-bin '{preset_name}' log-mels, but "
            f"{model_spec.name} expects {model_spec.n_mels}-bin '{model_spec.frontend_preset}'; "
            f"re-run prep with --preset {model_spec.frontend_preset} or choose another model"
        )


def epochs_per_pass(config: PretrainConfig, num_rows: int) -> int:
    """How many differently seeded epochs one streaming pass holds (1..MAX_EPOCHS_PER_PASS)."""
    needed_crops = config.steps * config.global_batch_size
    return max(1, min(MAX_EPOCHS_PER_PASS, math.ceil(needed_crops / max(1, num_rows))))


def build_training_dataset(config: PretrainConfig):
    """Ray Dataset of training crops ("mel": float32 (crop_frames, n_mels)) of a resolved config, streamed.

    Each epoch reads the part files in its own seeded order; the workers' local shuffle buffer
    mixes rows within that. No block-order shuffle: it is an all-to-all barrier that read and
    cropped every epoch of the pass before the first step (40 s of a 100-step debug run). The
    epochs are one dataset, not a union of per-epoch datasets: one execution to start, not several.
    """
    manifest = read_manifest(config.shards_dir)
    return crop_dataset(
        config.shards_dir,
        crop_frames=config.crop_frames,
        seed=config.seed,
        file_order_seed=config.seed,
        epochs=epochs_per_pass(config, int(manifest["num_rows"])),
        holdout=("train", validation_holdout_fraction(config, int(manifest["num_rows"]))),
    )


def rankme_pool(config: PretrainConfig) -> RankMePool:
    """The RankMe pool of a resolved config: crops of the model's length from `--rankme-shards` or the
    training shards, `rankme_n` of them (None: the paper's 30,000, or all there are when fewer)."""
    # Read in this process: plain pyarrow over the clip ids, no Ray Data job to start.
    return select_pool(config.rankme_shards_dir or config.shards_dir, crop_frames=config.crop_frames, n=config.rankme_n)


# A small shard set (a data-volume grid's smallest subset, a test's) held out too few clips at 1%:
# 80 rows gave none and the run failed. The holdout grows to about this many clips, up to a fifth.
MIN_VALIDATION_CLIPS = 8
MAX_VALIDATION_FRACTION = 0.2


def validation_holdout_fraction(config: PretrainConfig, num_rows: int | None = None) -> float:
    """Share of clips kept out of training for the validation MSE (none when validation is off):
    `--validation-fraction`, raised on small shard sets so that about MIN_VALIDATION_CLIPS are held out."""
    if config.validation_every_steps <= 0:
        return 0.0
    if num_rows is None:
        num_rows = int(read_manifest(config.shards_dir)["num_rows"])
    small_set = min(MAX_VALIDATION_FRACTION, MIN_VALIDATION_CLIPS / max(1, num_rows))
    return max(config.validation_fraction, small_set)


def load_validation_crops(config: PretrainConfig) -> torch.Tensor:
    """Up to `validation_num_clips` fixed crops of the held-out clips (pipeline.shards.holdout)."""
    crops = read_crops(
        config.shards_dir, crop_frames=config.crop_frames, seed=VALIDATION_SEED, limit=config.validation_num_clips,
        holdout=("validation", validation_holdout_fraction(config)),
    )  # fmt: skip
    if not len(crops):
        raise ValueError(
            f"no held-out clips in {config.shards_dir} for the validation MSE: raise --validation-fraction "
            f"({config.validation_fraction}) or set --validation-every 0"
        )
    return torch.from_numpy(crops)



def iterate_micro_batches(
    data_shard, *, micro_batch_size: int, device: torch.device, shuffle_buffer_crops: int, seed: int
) -> Iterator[torch.Tensor]:
    """Endless micro-batches (micro, crop_frames, n_mels) from this worker's share of the stream.

    Ray Train splits each pass into equal shares, so every rank yields the same number of batches
    per pass and starts the next pass together with the others.
    """
    pass_index = 0
    while True:
        num_batches = 0
        for batch in data_shard.iter_torch_batches(
            batch_size=micro_batch_size,
            dtypes=torch.float32,
            device=device,
            drop_last=True,
            local_shuffle_buffer_size=shuffle_buffer_crops or None,
            local_shuffle_seed=seed + pass_index,
        ):
            num_batches += 1
            yield batch["mel"]
        if num_batches == 0:
            raise ValueError(
                f"this worker received no full micro-batch of {micro_batch_size} crops: the shards hold too "
                "few segments for the batch size and number of workers; lower --batch-size or add audio"
            )
        pass_index += 1
