"""The waveform encoder as one module: feature encoder + projection + context network.

This is what torchaudio's wav2vec2 / HuBERT builders hold, and what the pipeline counts as
`model.encoder` (encoder_parameters): every weight `embed` uses, none of the pretraining heads.
Masking happens between the two halves: masked frames of the projected features are replaced by
a learned mask embedding before the context network (wav2vec 2.0 Sec. 3.1, HuBERT Sec. III-A).
"""

from __future__ import annotations

import torch
from torch import nn

from models.wave.context import ContextOutput
from models.wave.feature_encoder import WaveFeatureEncoder, WaveFeatures


class WaveEncoder(nn.Module):
    def __init__(self, features: WaveFeatureEncoder, context: nn.Module) -> None:
        super().__init__()
        self.features = features
        self.context = context  # WaveContextEncoder or ConformerContextEncoder: returns ContextOutput

    def forward(
        self, batch: torch.Tensor, mask: torch.Tensor | None = None, mask_embedding: torch.Tensor | None = None
    ) -> tuple[WaveFeatures, ContextOutput]:
        """batch (batch, frames, 320); mask (batch, frames) bool, True = replaced by
        `mask_embedding` (dim,) -> the features and the context network's outputs."""
        features = self.features(batch)
        x = features.projected
        if mask is not None:
            if mask_embedding is None:
                raise ValueError("a mask needs the mask embedding that replaces the masked frames")
            x = torch.where(mask[..., None], mask_embedding.to(x.dtype), x)
        return features, self.context(x)
