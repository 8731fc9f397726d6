"""The HEAR 2021 common API for any audioscale checkpoint, so the public HEAR tools can score it.

    import pipeline.interop.hear_api as hear
    model = hear.load_model("/path/to/checkpoint_dir")
    scene = hear.get_scene_embeddings(audio, model)          # (n, scene_embedding_size)
    frames, timestamps_ms = hear.get_timestamp_embeddings(audio, model)

`audio` is a float32 tensor (n_sounds, n_samples) at 16 kHz in [-1, 1]. Scene embeddings are the
mean over time of the frame features; timestamps are frame centres in milliseconds
(`pipeline.evaluate.embeddings`).
"""

from __future__ import annotations

import warnings

import torch
from torch import nn

from pipeline.audio.frontend import get_preset
from pipeline.evaluate.embeddings import FrameEmbedder, normalisation_for
from pipeline.evaluate.readout_calibration import Readout, calibrate_checkpoint

SAMPLE_RATE_HZ = 16_000


class HearModel(nn.Module):
    """A frozen audioscale model with the attributes the HEAR API requires."""

    def __init__(self, model: nn.Module, meta: dict | None = None) -> None:
        super().__init__()
        self.model = model.eval()
        self.meta = dict(meta or {})
        preset = get_preset(model.spec.frontend_preset)
        self.embedder = FrameEmbedder(self.model, normalisation=normalisation_for(preset, self.meta))
        self.sample_rate = SAMPLE_RATE_HZ
        self.scene_embedding_size = int(model.spec.embed_dim)
        self.timestamp_embedding_size = int(model.spec.embed_dim)


def load_model(model_file_path: str = "") -> HearModel:
    """A checkpoint directory (model.safetensors + model.json) -> HearModel on the CPU.

    An empty path gives an untrained `mae-debug` model: the HEAR validator calls load_model
    without a path to check the API alone.
    """
    from pipeline.checkpoint import load_model_from_checkpoint

    if not model_file_path:
        import models

        return HearModel(models.build_model("mae-debug"), {"model_name": "mae-debug"})
    model, meta = load_model_from_checkpoint(model_file_path)
    try:  # read out as a study reads its checkpoints out (pipeline.evaluate.readout_calibration)
        readout = calibrate_checkpoint(model, meta, device="cpu")
    except (OSError, ValueError) as error:  # a checkpoint shipped without its shards still loads
        warnings.warn(f"{model_file_path}: running statistics kept as saved, the shards are unreadable ({error})",
                      stacklevel=2)  # fmt: skip
        readout = Readout("recorded")
    return HearModel(model, {**meta, **readout.record()})


def _waves(audio: torch.Tensor, model: HearModel) -> list:
    if not isinstance(model, HearModel):
        raise TypeError("model must come from pipeline.interop.hear_api.load_model")
    if not isinstance(audio, torch.Tensor) or audio.ndim != 2:
        raise ValueError(
            f"audio must be a 2-D torch tensor (n_sounds, n_samples), got {type(audio).__name__} {getattr(audio, 'shape', '')}"
        )
    return list(audio.detach().to("cpu", torch.float32).numpy())


def get_scene_embeddings(audio: torch.Tensor, model: HearModel) -> torch.Tensor:
    """(n_sounds, n_samples) -> float32 (n_sounds, scene_embedding_size)."""
    return torch.from_numpy(model.embedder.scene_embeddings(_waves(audio, model)))


def get_timestamp_embeddings(audio: torch.Tensor, model: HearModel) -> tuple[torch.Tensor, torch.Tensor]:
    """(n_sounds, n_samples) -> (float32 (n_sounds, frames, size), float32 timestamps (n_sounds, frames) ms)."""
    features, timestamps_ms = model.embedder.timestamp_embeddings(_waves(audio, model))
    return torch.from_numpy(features), torch.from_numpy(timestamps_ms)
