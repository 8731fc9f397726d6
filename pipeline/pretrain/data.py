"""The data side of pretraining: each worker's stream of crops, its position, and the RankMe pool.

The training crops come from `pipeline.shards.crop_stream`: each worker reads its own share of every
epoch in a fixed order, fresh crops each epoch, with the position after every micro-batch known, so a
checkpoint can store where the data stood and a resumed run sees exactly the crops an uninterrupted
run would have (docs/stages.md, fault tolerance). A background thread reads and crops ahead while the worker
trains: numpy and the Parquet decoder release the GIL.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator
from typing import Any

import numpy as np
import torch

from pipeline.pretrain.config import PretrainConfig
from pipeline.rankme.pool import RankMePool, select_pool
from pipeline.rankme.readout_stats import calibration_pool
from pipeline.shards.crop_stream import CropStream, StreamPlan, StreamPosition, batches
from pipeline.shards.crops import RawCrops, crop_policy, read_crops
from pipeline.shards.format import read_manifest

PREFETCH_MICRO_BATCHES = 4  # read ahead by this many; enough to hide a window's read behind a step
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


def input_statistics_meta(shards_dir: str) -> dict[str, Any]:
    """The per-bin mean and std the crops of `shards_dir` are standardised with, as checkpoint metadata
    (`mel_mean`, `mel_std`, the manifest's values): a checkpoint then reads out with its training
    normalisation wherever it is evaluated, without reaching back to the shards
    (pipeline.evaluate.embeddings.normalisation_for). Empty for presets standardised per clip."""
    manifest = read_manifest(shards_dir)
    if crop_policy(manifest, crop_frames=1, seed=0).bin_mean is None:
        return {}
    return {"mel_mean": list(manifest["mean"]), "mel_std": list(manifest["std"])}


def give_model_its_input_standardisation(
    model: torch.nn.Module, shards_dir: str, statistics: dict[str, Any] | None = None
) -> bool:
    """Tell a model that regresses raw dB (the study MAE's Dasheng target) how its crops were
    standardised: the shard set's per-bin mean and std, as the crop policy applies them. True when
    the model took them; presets standardised per clip have no fixed map to undo. `statistics`:
    `input_statistics_meta(shards_dir)` when the caller has it (one manifest read, not two)."""
    if not hasattr(model, "set_input_standardisation"):
        return False
    statistics = input_statistics_meta(shards_dir) if statistics is None else statistics
    if not statistics:
        return False
    # As the crop policy applies them (pipeline.shards.crops.crop_policy): float32, std floored at 1e-5.
    mean = torch.tensor(statistics["mel_mean"], dtype=torch.float32)
    std = torch.clamp(torch.tensor(statistics["mel_std"], dtype=torch.float32), min=1e-5)
    model.set_input_standardisation(mean, std)
    return True


def rankme_pool(config: PretrainConfig) -> RankMePool:
    """The RankMe pool of a resolved config: crops of the model's length from `--rankme-shards` or the
    training shards, `rankme_n` of them (None: the paper's 30,000, or all there are when fewer)."""
    # Read in this process: plain pyarrow over the clip ids, no Ray Data job to start.
    return select_pool(
        config.data.rankme_shards_dir or config.data.shards_dir,
        crop_frames=config.model.crop_frames,
        n=config.rankme.rankme_n,
    )


def readout_calibration(config: PretrainConfig) -> RankMePool:
    """The crops a readout's running statistics are re-estimated on (pipeline.rankme.readout_stats):
    from the RankMe pool's shards, so that evaluation re-derives the same ones from the checkpoint."""
    return calibration_pool(
        config.data.rankme_shards_dir or config.data.shards_dir, crop_frames=config.model.crop_frames
    )


# A small shard set (a data-volume grid's smallest subset, a test's) held out too few clips at 1%:
# 80 rows gave none and the run failed. The holdout grows to about this many clips, up to a fifth.
MIN_VALIDATION_CLIPS = 8
MAX_VALIDATION_FRACTION = 0.2


def validation_holdout_fraction(config: PretrainConfig, num_rows: int | None = None) -> float:
    """Share of clips kept out of training for the validation MSE (none when validation is off):
    `--validation-fraction`, raised on small shard sets so that about MIN_VALIDATION_CLIPS are held out."""
    if config.validation.validation_every_steps <= 0:
        return 0.0
    if num_rows is None:
        num_rows = int(read_manifest(config.data.shards_dir)["num_rows"])
    small_set = min(MAX_VALIDATION_FRACTION, MIN_VALIDATION_CLIPS / max(1, num_rows))
    return max(config.validation.validation_fraction, small_set)


def load_validation_crops(config: PretrainConfig) -> torch.Tensor:
    """Up to `validation_num_clips` fixed crops of the held-out clips (pipeline.shards.holdout)."""
    crops = read_crops(
        config.data.shards_dir, crop_frames=config.model.crop_frames, seed=VALIDATION_SEED, limit=config.validation.validation_num_clips,
        holdout=("validation", validation_holdout_fraction(config)),
    )  # fmt: skip
    if not len(crops):
        raise ValueError(
            f"no held-out clips in {config.data.shards_dir} for the validation MSE: raise --validation-fraction "
            f"({config.validation.validation_fraction}) or set --validation-every 0"
        )
    return torch.from_numpy(crops)


def training_stream_plan(config: PretrainConfig, *, rank: int, world_size: int) -> StreamPlan:
    """Which rows this worker reads in each epoch (the holdout and the short segments left out)."""
    return StreamPlan(
        config.data.shards_dir, crop_frames=config.model.crop_frames, seed=config.training.seed, rank=rank, world_size=world_size,
        holdout=("train", validation_holdout_fraction(config)),
    )  # fmt: skip


class MicroBatches:
    """This worker's endless micro-batches (micro, crop_frames, n_mels) on `device`, from `start` on.

    `position` is where the stream stands after the last micro-batch handed out: what a checkpoint saves.
    A thread reads ahead; an error there is raised here, at the next micro-batch. On a GPU the crops
    travel as stored (float16) and are normalised there; on a CPU the reader thread normalises them,
    on the core the training thread does not use.
    """

    def __init__(
        self, plan: StreamPlan, *, micro_batch_size: int, window_rows: int, device: torch.device, start: StreamPosition
    ) -> None:
        self.position, self.device = start, device
        self._ready: queue.Queue = queue.Queue(maxsize=PREFETCH_MICRO_BATCHES)
        self._stop = threading.Event()
        source = batches(CropStream(plan, window_rows=window_rows), batch_size=micro_batch_size, start=start)
        self._thread = threading.Thread(target=self._read_ahead, args=(source,), daemon=True, name="crop-reader")
        self._thread.start()

    def _read_ahead(self, source: Iterator) -> None:
        try:
            for raw, position in source:
                item = (raw.normalised() if self.device.type == "cpu" else raw, position)
                while not self._stop.is_set():
                    try:
                        self._ready.put(item, timeout=0.5)
                        break
                    except queue.Full:
                        continue
                if self._stop.is_set():
                    return
        except Exception as error:  # noqa: BLE001 - handed to the training thread, which raises it
            self._ready.put(error)

    def __iter__(self) -> MicroBatches:
        return self

    def __next__(self) -> torch.Tensor:
        item = self._ready.get()
        if isinstance(item, BaseException):
            raise item
        crops, self.position = item
        if isinstance(crops, np.ndarray):
            return torch.from_numpy(crops)
        return normalise_on_device(crops, self.device)

    def close(self) -> None:
        self._stop.set()


def normalise_on_device(raw: RawCrops, device: torch.device) -> torch.Tensor:
    """`RawCrops.normalised()` computed on `device`: float32 (n, crop_frames, n_mels)."""
    mel = torch.from_numpy(raw.mel).to(device, non_blocking=True).float()
    shift, scale, valid, pad = (torch.from_numpy(array).to(device, non_blocking=True)
                                for array in (raw.shift, raw.scale, raw.valid, raw.pad))  # fmt: skip
    crops = (mel - shift[:, None, :]) / scale[:, None, :]
    padding = torch.arange(crops.shape[1], device=device)[None, :] >= valid[:, None]
    return torch.where(padding[:, :, None], pad[:, None, None], crops)
