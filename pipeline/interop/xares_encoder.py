"""An audioscale checkpoint as an X-ARES audio encoder, so Dasheng's authors' suite can score it.

X-ARES (github.com/jimbozhang/xares) imports a Python file, takes its one class whose name ends
in "Encoder", builds it without arguments, and calls it on 16 kHz waveforms; the checkpoint
therefore comes from an environment variable:

    AUDIOSCALE_CHECKPOINT=<checkpoint dir> python -m xares.run pipeline/interop/xares_encoder.py <task files>

The contract (X-ARES's `check_audio_encoder`): a torch module with `sampling_rate`, `output_dim`
and `hop_size_in_ms`, whose forward maps (batch, samples) to (batch, frames, output_dim). The
frames are the HEAR API's timestamp embeddings (`pipeline.interop.hear_api`): the same front end,
normalisation and crop-by-crop encoding as every probe in this project.
"""

from __future__ import annotations

import os

import torch
from torch import nn

from pipeline.interop import hear_api

CHECKPOINT_ENV = "AUDIOSCALE_CHECKPOINT"


class AudioscaleEncoder(nn.Module):
    """A frozen audioscale checkpoint with X-ARES's encoder attributes."""

    def __init__(self, checkpoint_dir: str | os.PathLike | None = None) -> None:
        super().__init__()
        path = str(checkpoint_dir or os.environ.get(CHECKPOINT_ENV, ""))
        if not path:
            raise ValueError(
                f"AudioscaleEncoder needs a checkpoint: set {CHECKPOINT_ENV} to a checkpoint directory "
                "(model.safetensors + model.json, e.g. a study trial's checkpoint_*/) or pass checkpoint_dir"
            )
        self.hear = hear_api.load_model(path)
        spec = self.hear.model.spec
        self.sampling_rate = hear_api.SAMPLE_RATE_HZ
        self.output_dim = int(spec.embed_dim)
        self.hop_size_in_ms = float(spec.frame_hop_ms)

    def forward(self, audio: torch.Tensor) -> torch.Tensor:
        """(batch, samples) or (samples,) 16 kHz audio -> (batch, frames, output_dim) float32."""
        if audio.ndim == 1:
            audio = audio.unsqueeze(0)
        features, _ = hear_api.get_timestamp_embeddings(audio, self.hear)
        return features.to(self.hear.embedder.device)
