"""HuBERT iteration 2's labeller: a frozen copy of a trained HuBERT up to one layer, and the
nearest centroid of that layer's output (HuBERT Sec. II-D / IV-B: BASE clusters the first
iteration's layer-6 output into 500 units; Large and X-Large the second iteration's layer 9).

The stage (`python -m pipeline.targets --features hubert --teacher CKPT`) writes the truncated
teacher's weights into the codebook folder (`teacher.safetensors`) and its configuration into
codebook.json, so a codebook folder holds everything labelling needs. A student built with it
carries the teacher as a frozen submodule: saved in every checkpoint, never trained (no
requires_grad, so neither counted as parameters nor given to the optimizer), always in eval mode.

The layer's output is fairseq's `extract_features(output_layer=L)`: block L's output, before the
final LayerNorm of the pre-LN sizes (models/wave/context.py `ContextOutput.layers`). One label per
20 ms frame: the teacher's frames are the student's (fairseq label_rate 50).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import torch
from torch import nn

from models.wave.hubert_config import HubertConfig
from models.wave.hubert_encoder import build_hubert_encoder
from models.wave.hubert_labels import nearest_centroid

TEACHER_WEIGHTS_NAME = "teacher.safetensors"


def truncated_teacher_config(config: HubertConfig, layer: int) -> HubertConfig:
    """The teacher's configuration with only its first `layer` blocks, no codebook of its own."""
    if not 1 <= layer <= config.encoder_depth:
        raise ValueError(f"teacher layer {layer}: {config.name} has blocks 1 to {config.encoder_depth}")
    return dataclasses.replace(config, encoder_depth=layer, codebook=None, embed_layer=None)


class FrozenHubertTeacher(nn.Module):
    """The first `config.encoder_depth` blocks of a HuBERT encoder, frozen: (batch, T, 320) -> (batch, T, dim)."""

    def __init__(self, config: HubertConfig) -> None:
        super().__init__()
        self.config = config
        self.encoder = build_hubert_encoder(config)
        self.requires_grad_(False)
        self.train(False)

    def train(self, mode: bool = True) -> FrozenHubertTeacher:
        """Always eval: the student's `model.train()` must not switch on the teacher's dropout."""
        return super().train(False)

    @torch.no_grad()
    def forward(self, batch: torch.Tensor) -> torch.Tensor:
        _, context = self.encoder(batch)
        return context.layers[-1]  # block `encoder_depth`'s output: the chosen layer

    def load_weights(self, path: Path) -> None:
        import safetensors.torch

        if any(parameter.is_meta for parameter in self.parameters()):
            return  # a weightless build (describe_model, `python -m models --list`) has nowhere to put them

        state = safetensors.torch.load_file(str(path))
        missing, unexpected = self.encoder.load_state_dict(state, strict=False)
        if missing or unexpected:
            raise ValueError(
                f"{path} does not match the teacher's layers: missing {sorted(missing)[:3]}, "
                f"unexpected {sorted(unexpected)[:3]}; re-run python -m pipeline.targets"
            )


def teacher_forward_flops(teacher: FrozenHubertTeacher, frames: int) -> float:
    """2 N per position (forward only): the convs on their output positions, the rest on every frame.
    The encoder pieces count 6 N (forward + backward); the teacher runs a third of that."""
    encoder = teacher.encoder
    return (encoder.features.training_flops_per_sample(frames) + encoder.context.training_flops_per_sample(frames)) / 3


class TeacherFrameLabeller(nn.Module):
    """(batch, T, 320) crops -> (batch, T) nearest centroids of the frozen teacher's layer output."""

    def __init__(self, teacher: FrozenHubertTeacher, centroids: torch.Tensor) -> None:
        super().__init__()
        if centroids.ndim != 2 or centroids.shape[1] != teacher.config.encoder_dim:
            raise ValueError(
                f"a layer-output codebook has (clusters, {teacher.config.encoder_dim}) centroids, "
                f"got {tuple(centroids.shape)}"
            )
        self.teacher = teacher
        self.register_buffer("centroids", centroids.float().clone())

    def flops_per_crop(self, frames: int) -> float:
        """The teacher's forward pass plus the distances to every centroid (2 k dim per frame)."""
        return teacher_forward_flops(self.teacher, frames) + 2.0 * self.centroids.numel() * frames

    @torch.no_grad()
    def forward(self, batch: torch.Tensor) -> torch.Tensor:
        frames = self.teacher(batch)  # (batch, T, dim)
        return nearest_centroid(frames.reshape(-1, frames.shape[-1]), self.centroids).reshape(frames.shape[:2])
