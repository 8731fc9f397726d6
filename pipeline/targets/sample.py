"""The crops a k-means fit sees: a seeded random sample of a waveform shard set's segment rows, one
training crop from each (cut, normalised and padded by the training reader's own policy)."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from pipeline.shards.crops import crop_policy
from pipeline.shards.format import checked_part_names, read_manifest
from pipeline.shards.location import locate_shards
from pipeline.targets.settings import TargetSettings


class NotWaveformShardsError(ValueError):
    """HuBERT's targets are computed from samples; log-mel shards cannot give them."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class SampledCrops:
    crops: np.ndarray  # float32 (n, crop_frames, 320): normalised waveform crops
    rows_total: int  # segment rows in the shard set
    rows_drawn: int  # rows the seeded draw picked
    rows_too_short: int  # drawn rows under the reader's minimum (half a crop): skipped, as training skips them


def check_waveform_manifest(shards_dir: str | Path, manifest: dict) -> None:
    preset = manifest.get("preset", {})
    if preset.get("kind") != "waveform":
        raise NotWaveformShardsError(
            f"{shards_dir} holds {preset.get('name', '?')!r} features ({manifest.get('n_mels', '?')} mel bins), not "
            "waveform samples; HuBERT's targets are computed from the waveform: prepare the audio with "
            "python -m pipeline.prep --input AUDIO --output DIR --preset waveform, and pass that DIR"
        )


def read_sample_crops(
    shards_dir: str | Path, settings: TargetSettings, log: Callable[[str], None] = lambda line: None
) -> SampledCrops:
    """`ceil(sample_fraction x rows)` rows (at most `max_sample_crops`) drawn without replacement with
    `settings.seed`; each gives the crop the training reader would cut from it with that seed."""
    manifest = read_manifest(shards_dir)
    check_waveform_manifest(shards_dir, manifest)
    location = locate_shards(shards_dir)
    paths = [location.child_path(name) for name in checked_part_names(shards_dir, manifest)]
    rows_per_file = [pq.read_metadata(path, filesystem=location.filesystem).num_rows for path in paths]
    rows_total = int(sum(rows_per_file))
    if rows_total == 0:
        raise ValueError(f"{shards_dir} has no segment rows (see its rejected.jsonl for why every input was rejected)")
    wanted = min(settings.max_sample_crops, math.ceil(settings.sample_fraction * rows_total))
    drawn = np.sort(np.random.default_rng(settings.seed).choice(rows_total, size=wanted, replace=False))
    log(
        f"targets: drawing {wanted} of {rows_total} segment rows ({100 * wanted / rows_total:.1f}%) "
        f"from {len(paths)} part files, one {settings.crop_frames}-frame crop each"
    )
    policy = crop_policy(manifest, crop_frames=settings.crop_frames, seed=settings.seed)
    parts, too_short, first_row = [], 0, 0
    for path, rows in zip(paths, rows_per_file):
        local = drawn[(drawn >= first_row) & (drawn < first_row + rows)] - first_row
        first_row += rows
        if len(local) == 0:
            continue
        table = pq.read_table(path, columns=policy.columns(), filesystem=location.filesystem).take(pa.array(local))
        keep = policy.kept_rows(table)
        too_short += int((~keep).sum())
        if keep.any():
            parts.append(policy.crop(table.filter(pa.array(keep))))
    crops = np.concatenate(parts) if parts else np.zeros((0, settings.crop_frames, int(manifest["n_mels"])), np.float32)
    return SampledCrops(crops=crops, rows_total=rows_total, rows_drawn=wanted, rows_too_short=too_short)
