"""Frozen-model embeddings of 16 kHz audio: frame, timestamp and scene embeddings.

Audio -> the model's front end (`pipeline.audio.frontend`, the preset the model was trained with, the
same normalisation as training) -> crop-length chunks -> `model.embed` -> frame features.

- Frame features: one per patch column, every `spec.frame_hop_ms`. A clip is cut into chunks of
  `spec.crop_frames` mel frames (the length the position tables were trained on); the last chunk
  keeps its real length, rounded to a whole number of patches: a trailing partial patch is padded
  with the clip's minimum value (after log compression, what silence looks like; the training
  crops pad the same way) when its centre frame is audio, dropped otherwise, so every timestamp
  lies inside the clip.
- Scene embedding: the mean over time of a clip's frame features, as the AudioMAE/Dasheng papers do.
- Timestamp embeddings: frame features with the time of each frame's centre in milliseconds:
  patch i spans mel frames [i P, (i + 1) P) whose STFT windows are centred at j * hop_ms, so its
  centre is (i P + (P - 1) / 2) * hop_ms.
- Memory stays bounded: clips are processed `clips_per_group` at a time and chunks are encoded
  `batch_chunks` at a time; only the pooled results are kept.
"""

from __future__ import annotations

import hashlib
import warnings
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from pipeline.audio.frontend import (
    FrontendPreset,
    compute_features,
    get_preset,
    normalize_clip,
)
from pipeline.shards.format import read_manifest
from pipeline.storage.bucket_check import storage_error, without_query

DEFAULT_BATCH_CHUNKS = 32
WAVE_RECEPTIVE_FIELD_MS = 25.0  # 400 samples at 16 kHz: the waveform models' conv stack, kernels (10,3,3,3,3,2,2)
DEFAULT_CLIPS_PER_GROUP = 64
# Part of every cached model input's key: raise it when `model_input`'s rule changes, so inputs
# cached under the old rule are not reused (2: a partial patch is kept only when its centre is audio).
INPUT_RULE = 2


@dataclass(frozen=True, kw_only=True)
class MelNormalisation:
    """How training normalised the log-mel: per clip, or with per-bin dataset mean/std."""

    per_clip: bool
    bin_mean: np.ndarray | None = None  # (n_mels,)
    bin_std: np.ndarray | None = None  # (n_mels,)
    # Where the dataset statistics were read ("model.json", or the training shards' manifest), and for a
    # per-clip rule standing in for statistics that could not be found, why: part of the record below.
    stats_from: str = ""
    substitute_for_stats: bool = False

    def apply(self, mel: np.ndarray) -> np.ndarray:
        if self.per_clip:
            return normalize_clip(mel)
        # A bin constant over the dataset (std ~0: `ssast`'s empty filter 3) is 0, as in training, where
        # its stored float16 value equals its mean; dividing float32 audio by 1e-5 would give ~+293.
        constant = self.bin_std <= 1e-5
        return np.where(constant, 0.0, (mel - self.bin_mean) / np.where(constant, 1.0, self.bin_std)).astype(np.float32)

    def record(self) -> dict[str, str]:
        """What a result must say about its inputs to be comparable with another: the rule, where the
        statistics came from and a digest of them (equal digests, equal model inputs)."""
        if self.per_clip:
            rule = "per-clip (substitute: no dataset statistics found)" if self.substitute_for_stats else "per-clip"
            return {"input_normalisation": rule, "input_stats_from": "", "input_stats_sha256": ""}
        digest = hashlib.sha256(self.bin_mean.tobytes() + self.bin_std.tobytes()).hexdigest()[:16]
        return {"input_normalisation": "dataset", "input_stats_from": self.stats_from, "input_stats_sha256": digest}


def normalisation_for(preset: FrontendPreset, meta: dict | None = None) -> MelNormalisation:
    """The training normalisation of a checkpoint: the preset's rule, dataset stats from `meta`.

    Presets without per-clip normalisation (dasheng) trained on the shards' per-bin mean/std: taken
    from `mel_mean` / `mel_std` in model.json (pretraining writes them), else from the manifest of the
    training shards named in its `pretrain_config`, read where they are (a folder or a bucket). Without
    either, per-clip standardisation is the closest substitute: a warning says so and `record()` names
    it. A bucket that cannot be read is an error, never a silent substitute.
    """
    if preset.normalize_per_clip:
        return MelNormalisation(per_clip=True)
    meta = meta or {}
    if meta.get("mel_mean") is not None:
        stats = {"mel_mean": meta["mel_mean"], "mel_std": meta.get("mel_std"), "from": "model.json"}
    else:
        stats = _shard_stats(meta)
    if stats.get("mel_mean") is not None and stats.get("mel_std") is not None:
        mean, std = np.asarray(stats["mel_mean"], np.float32), np.asarray(stats["mel_std"], np.float32)
        if mean.shape != (preset.n_mels,) or std.shape != (preset.n_mels,):
            raise ValueError(
                f"checkpoint mel_mean/mel_std must have {preset.n_mels} values, got {mean.shape}, {std.shape}"
            )
        return MelNormalisation(per_clip=False, bin_mean=mean, bin_std=std, stats_from=stats["from"])
    warnings.warn(
        f"preset {preset.name!r} trains on dataset mean/std but the checkpoint has no mel_mean/mel_std and its "
        "training shards' manifest is gone; standardising each clip instead (recorded as a substitute)",
        stacklevel=2,
    )
    return MelNormalisation(per_clip=True, substitute_for_stats=True)


def _shard_stats(meta: dict) -> dict:
    """The per-bin statistics in the manifest of the checkpoint's training shards (a folder or a bucket
    URI, through `pipeline.shards.format.read_manifest`); {} when no shards are named or none are there."""
    shards_dir = (meta.get("pretrain_config") or {}).get("shards_dir")
    if not shards_dir:
        return {}
    try:
        manifest = read_manifest(shards_dir)
    except FileNotFoundError:
        return {}
    except OSError as error:  # a bucket that does not answer: the substitute would change Q silently
        raise storage_error(
            str(shards_dir), error, what="the checkpoint's training shards", doing="read their manifest"
        ) from None
    return {"mel_mean": manifest.get("mean"), "mel_std": manifest.get("std"), "from": without_query(str(shards_dir))}


class FrameEmbedder:
    """Turns 16 kHz waveforms into frame features of a frozen model (eval mode, no gradients)."""

    def __init__(
        self,
        model: nn.Module,
        *,
        normalisation: MelNormalisation | None = None,
        batch_chunks: int = DEFAULT_BATCH_CHUNKS,
        clips_per_group: int = DEFAULT_CLIPS_PER_GROUP,
        device: str | torch.device | None = None,
    ) -> None:
        self.model = model.eval()
        self.spec = model.spec
        self.preset = get_preset(self.spec.frontend_preset)
        if self.preset.n_mels != self.spec.n_mels:
            raise ValueError(
                f"model {self.spec.name} expects {self.spec.n_mels} mel bins, preset {self.preset.name} gives {self.preset.n_mels}"
            )
        self.normalisation = normalisation or normalisation_for(self.preset)
        self.batch_chunks = batch_chunks
        self.clips_per_group = clips_per_group
        if device is not None:
            self.model.to(device)

    @property
    def device(self) -> torch.device:
        """Where inputs go: wherever the model's weights are now, so `model.to("cuda")` after
        construction (what HEAR's harness does to the module it loads) moves the inputs too."""
        weight = next(self.model.parameters(), None)
        return weight.device if weight is not None else torch.device("cpu")

    @property
    def embedding_size(self) -> int:
        return int(self.spec.embed_dim)

    @property
    def input_key(self) -> tuple:
        """What the model input of a clip depends on: equal keys, equal inputs (the task input cache's key)."""
        norm = self.normalisation
        stats = b"" if norm.per_clip else norm.bin_mean.tobytes() + norm.bin_std.tobytes()
        return (INPUT_RULE, self.preset.name, self.spec.n_mels, self.spec.patch_frames, norm.per_clip, stats)

    def model_input(self, wave_16k: np.ndarray) -> np.ndarray:
        """Normalised log-mel rounded to whole patches: (frames, n_mels), frames % patch_frames == 0."""
        wave = np.asarray(wave_16k, dtype=np.float32)
        if len(wave) < self.preset.min_samples:  # too short for one STFT window or frame: pad with silence
            wave = np.pad(wave, (0, self.preset.min_samples - len(wave)))
        mel = self.normalisation.apply(compute_features(wave, self.preset))
        patch = self.spec.patch_frames
        whole_patches, remainder = divmod(len(mel), patch)
        # Mel frame j is centred at j * hop, and the last frame's centre is still inside the clip.
        # A trailing partial patch is kept only when its centre, (P - 1) / 2 frames after its first
        # frame, is a real frame: otherwise its timestamp would lie past the end of the audio
        # (HEAR's validator refuses that), e.g. 1.01 s gives 102 frames and a patch centred at 1015 ms.
        n_patches = max(1, whole_patches + (1 if 2 * remainder >= patch + 1 else 0))
        padded_frames = n_patches * patch
        mel = mel[:padded_frames]
        if padded_frames > len(mel):
            mel = np.pad(mel, ((0, padded_frames - len(mel)), (0, 0)), constant_values=self.preset.silence(mel))
        return mel.astype(np.float32, copy=False)

    @torch.inference_mode()
    def _encode_chunks(self, chunks: list[np.ndarray]) -> list[np.ndarray]:
        """Chunks (len_i, n_mels) -> features (len_i / patch_frames, dim), batched by equal length."""
        outputs: list[np.ndarray | None] = [None] * len(chunks)
        by_length: dict[int, list[int]] = {}
        for index, chunk in enumerate(chunks):
            by_length.setdefault(len(chunk), []).append(index)
        for indices in by_length.values():
            for start in range(0, len(indices), self.batch_chunks):
                batch_indices = indices[start : start + self.batch_chunks]
                batch = torch.from_numpy(np.stack([chunks[i] for i in batch_indices])).to(self.device)
                features = self.model.embed(batch).float().cpu().numpy()  # (batch, frames, dim)
                for row, index in enumerate(batch_indices):
                    outputs[index] = features[row]
        return outputs

    def _frame_features_of_group(self, waves: Sequence[np.ndarray]) -> list[np.ndarray]:
        return self.frame_features_of_inputs([self.model_input(wave) for wave in waves])

    def frame_features_of_inputs(self, mels: Sequence[np.ndarray]) -> list[np.ndarray]:
        """Frame features (frames_i / patch_frames, dim) of model inputs (`model_input`'s output)."""
        crop = self.spec.crop_frames
        chunks, owners = [], []
        for clip_index, mel in enumerate(mels):
            for start in range(0, len(mel), crop):
                chunks.append(mel[start : start + crop])
                owners.append(clip_index)
        encoded = self._encode_chunks(chunks)
        per_clip: list[list[np.ndarray]] = [[] for _ in mels]
        for owner, features in zip(owners, encoded):
            per_clip[owner].append(features)
        return [np.concatenate(parts, axis=0) for parts in per_clip]

    def iter_frame_features(self, waves: Iterable[np.ndarray]) -> Iterable[np.ndarray]:
        """Frame features (frames_i, dim) float32 for each waveform, in order, group by group."""
        group: list[np.ndarray] = []
        for wave in waves:
            group.append(wave)
            if len(group) == self.clips_per_group:
                yield from self._frame_features_of_group(group)
                group = []
        if group:
            yield from self._frame_features_of_group(group)

    def scene_embeddings(self, waves: Iterable[np.ndarray]) -> np.ndarray:
        """(n, dim) float32: the mean over time of each clip's frame features."""
        pooled = [features.mean(axis=0) for features in self.iter_frame_features(waves)]
        if not pooled:
            return np.zeros((0, self.embedding_size), dtype=np.float32)
        return np.stack(pooled).astype(np.float32, copy=False)

    def frame_centres_ms(self, n_frames: int) -> np.ndarray:
        """(n_frames,) float32 centre times of frame features, in milliseconds."""
        patch = self.spec.patch_frames
        if self.preset.kind == "waveform":
            # encoder frame t of a waveform model sees samples [320 t, 320 t + 400): the conv feature
            # encoder's receptive field (wav2vec 2.0 Sec. 2), centred 200 samples = 12.5 ms in
            return (np.arange(n_frames) * self.preset.hop_ms + WAVE_RECEPTIVE_FIELD_MS / 2).astype(np.float32)
        return ((np.arange(n_frames) * patch + (patch - 1) / 2.0) * self.preset.hop_ms).astype(np.float32)

    def timestamp_embeddings(self, waves: Sequence[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        """Equal-length waveforms -> (features (n, T, dim) float32, timestamps (n, T) ms float32)."""
        lengths = {len(wave) for wave in waves}
        if len(lengths) > 1:
            raise ValueError(f"timestamp embeddings need equal-length audio, got lengths {sorted(lengths)}")
        features = [frames for frames in self.iter_frame_features(waves)]
        if not features:
            return np.zeros((0, 0, self.embedding_size), np.float32), np.zeros((0, 0), np.float32)
        stacked = np.stack(features).astype(np.float32, copy=False)  # (n, T, dim)
        timestamps = np.broadcast_to(self.frame_centres_ms(stacked.shape[1]), stacked.shape[:2]).copy()
        return stacked, timestamps
