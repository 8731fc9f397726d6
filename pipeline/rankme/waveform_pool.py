"""The RankMe pool as audio, for models that take waveforms (any HEAR module) instead of our log-mel.

The pool (`pipeline.rankme.pool`) is a list of (segment row, crops taken from it): crop k of a
row is mel frames [k C, (k + 1) C) of that row, C = crop_frames. Its waveform equivalent is the same
stretch of the same source file: the row's `source`, from `offset_s + k C hop_s` for `C hop_s`
seconds (mel frame j of a segment is centred at j hop_s, the STFT being centred), cut at the
segment's end. So an external model embeds the same clips, the same segment offsets and the same
crop duration as our models, and its R shares the pool's N and fingerprint.

Two honest differences, both documented where R is logged:
- The audio is decoded from the source files the shards were made from (the manifest's `input`
  plus each row's `source`), at the file's own rate, downmixed and resampled once, straight to
  the model's rate: a 32 kHz model is not fed 16 kHz audio upsampled.
- A last partial crop (at least half a crop long: `crops_in_row`) is padded with zeros to the crop
  length, as the mel pool pads it with the row's minimum (silence after log compression).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import soundfile
import torch
import torchaudio

from pipeline.audio.frontend import downmix_to_mono
from pipeline.rankme.pool import RankMePool
from pipeline.shards.format import read_manifest, read_shard_table


def source_path(manifest: dict, source: str) -> Path:
    """Where prep read a row's `source`: under the input directory, or beside the input manifest."""
    path = Path(source).expanduser()
    if path.is_absolute():
        return path
    input_path = Path(manifest.get("input") or "")
    return (input_path.parent if input_path.suffix.lower() in (".csv", ".jsonl") else input_path) / path


def _read_seconds(path: Path, start_s: float, seconds: float) -> tuple[np.ndarray, int]:
    """Mono float32 samples of [start_s, start_s + seconds) of a file, and its sample rate."""
    try:
        with soundfile.SoundFile(str(path)) as handle:
            rate = handle.samplerate
            handle.seek(min(round(start_s * rate), handle.frames))
            block = handle.read(round(seconds * rate), dtype="float32", always_2d=True)
    except (OSError, RuntimeError, soundfile.LibsndfileError) as error:
        raise FileNotFoundError(
            f"the RankMe pool's source audio {path} cannot be read ({error}); a waveform model's R needs the audio "
            "the shards were made from (their manifest's 'input'): make it readable at that path"
        ) from None
    return downmix_to_mono(block), int(rate)


def pool_crop_waveforms(pool: RankMePool, sample_rate_hz: int) -> Iterator[np.ndarray]:
    """Each pool crop as float32 (crop samples,) at `sample_rate_hz`, in pool order (see the module doc)."""
    manifest = read_manifest(pool.shards_dir)
    crop_s = pool.crop_frames * float(manifest.get("hop_ms") or manifest["preset"]["hop_ms"]) / 1000.0
    crop_samples = round(crop_s * sample_rate_hz)
    wanted = dict(pool.rows)
    table = read_shard_table(pool.shards_dir, columns=["clip_id", "source", "offset_s", "duration_s"])
    table = table.filter(pc.is_in(table["clip_id"], value_set=pa.array(list(wanted), table["clip_id"].type)))
    rows = {row["clip_id"]: row for row in table.to_pylist()}
    missing = [clip_id for clip_id in wanted if clip_id not in rows]
    if missing:
        raise ValueError(f"RankMe pool rows {missing[:3]} are not in {pool.shards_dir}; were the shards rebuilt?")
    for clip_id, count in pool.rows:
        row = rows[clip_id]
        wave, rate = _read_seconds(source_path(manifest, row["source"]), row["offset_s"], row["duration_s"])
        wave = _resampled(wave, rate, sample_rate_hz)
        for index in range(count):
            crop = wave[index * crop_samples : (index + 1) * crop_samples]
            yield np.pad(crop, (0, crop_samples - len(crop))) if len(crop) < crop_samples else crop


def _resampled(wave: np.ndarray, from_hz: int, to_hz: int) -> np.ndarray:
    if from_hz == to_hz:
        return np.ascontiguousarray(wave, dtype=np.float32)
    with torch.inference_mode():
        return torchaudio.functional.resample(torch.from_numpy(np.ascontiguousarray(wave)), from_hz, to_hz).numpy()
