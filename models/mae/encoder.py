"""Patch encoder shared by the study's MAE (ViT blocks) and AudioMAE++ (transformer++ blocks)."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from models.layers.blocks import LAYER_NORM_EPS, build_block_stack
from models.layers.masking import gather_tokens
from models.layers.positions import PositionEmbedding
from models.layers.rope import rotary_angles
from models.mae.config import MaskedAutoencoderConfig


@dataclass(frozen=True)
class EncoderOutput:
    tokens: torch.Tensor  # (batch, n_prefix + n_visible, dim), after the final LayerNorm
    n_prefix: int  # 1 when a cls token leads the sequence, else 0
    # Inputs to the blocks and every block output (depth + 1 maps, the last one normed), kept only
    # when a CrossMAE decoder asks for them.
    feature_maps: list[torch.Tensor] | None = None

    @property
    def patch_tokens(self) -> torch.Tensor:
        return self.tokens[:, self.n_prefix :]


class PatchEncoder(nn.Module):
    def __init__(self, config: MaskedAutoencoderConfig) -> None:
        super().__init__()
        dim = config.encoder_dim
        self.n_prefix = 1 if config.cls_token else 0
        # Dasheng's init_bn is BatchNorm2d(n_mels, momentum=0.01) over (batch, mel, 1, time): per mel
        # bin, statistics over batch and time. BatchNorm1d over (batch, mel, time) is the same.
        self.input_norm = nn.BatchNorm1d(config.n_mels, momentum=0.01) if config.input_batchnorm else None
        self.patch_embed = nn.Linear(config.patch_values, dim)  # = Conv2d with stride = kernel
        self.cls_token = nn.Parameter(torch.zeros(1, 1, dim)) if config.cls_token else None
        self.pos_embed = PositionEmbedding.over_grid(
            config.encoder_positions, config, dim, rows=config.encoder_position_rows
        )
        self.blocks = build_block_stack(
            config.block, dim, config.encoder_heads, config.encoder_depth, swiglu_norm=config.swiglu_norm
        )
        self.norm = nn.LayerNorm(dim, eps=LAYER_NORM_EPS)
        self.head_dim = dim // config.encoder_heads
        self.use_rope = config.encoder_rope
        # (time, freq) grid index of every patch, shifted by one so the cls token alone sits at 0.
        time_index = torch.arange(config.n_time_patches).repeat_interleave(config.n_freq_patches)
        freq_index = torch.arange(config.n_freq_patches).repeat(config.n_time_patches)
        grid = torch.stack([time_index, freq_index], dim=-1) + 1  # (n_patches, 2)
        self.register_buffer("grid_positions", grid, persistent=False)
        self._init_weights()

    def _init_weights(self) -> None:
        if self.cls_token is not None:
            nn.init.normal_(self.cls_token, std=0.02)
        for module in self.modules():
            if isinstance(module, nn.Linear):
                nn.init.xavier_uniform_(module.weight)
                nn.init.zeros_(module.bias)

    def normalize_mel(self, mel: torch.Tensor) -> torch.Tensor:
        """mel (batch, time, n_mels) -> the same with every mel bin batch-normalized (no-op without
        input_batchnorm): batch statistics in training mode, running statistics in eval mode."""
        if self.input_norm is None:
            return mel
        # in float32 outside autocast, as Dasheng computes its spectrogram and init_bn
        with torch.autocast(device_type=mel.device.type, enabled=False):
            return self.input_norm(mel.float().transpose(1, 2)).transpose(1, 2)

    def forward(
        self,
        patches: torch.Tensor,
        ids_keep: torch.Tensor | None = None,
        *,
        keep_feature_maps: bool = False,
    ) -> EncoderOutput:
        """patches (batch, n, patch_values) in patch order; ids_keep (batch, n_keep) or None = all."""
        batch, n_patches, _ = patches.shape
        if n_patches > self.pos_embed.n_positions:
            raise ValueError(
                f"{n_patches} patches exceed the {self.pos_embed.n_positions} positions the encoder "
                "was built for: split long inputs into crops (model.embed does this)"
            )
        positions = self.grid_positions[:n_patches].expand(batch, -1, -1)  # (batch, n, 2)
        if ids_keep is None:
            x = self.pos_embed(self.patch_embed(patches))  # (batch, n, dim)
        else:
            # embed only the visible patches: the removed ones never cost a matmul
            visible = gather_tokens(patches, ids_keep)  # (batch, n_keep, patch_values)
            x = self.patch_embed(visible) + self.pos_embed.at(ids_keep)  # (batch, n_keep, dim)
            positions = gather_tokens(positions, ids_keep)
        if self.cls_token is not None:
            x = torch.cat([self.cls_token.expand(batch, -1, -1), x], dim=1)
            positions = torch.cat([positions.new_zeros(batch, 1, 2), positions], dim=1)
        rope = rotary_angles(positions, self.head_dim) if self.use_rope else None
        feature_maps = [x] if keep_feature_maps else None
        for block in self.blocks:
            x = block(x, rope)
            if feature_maps is not None:
                feature_maps.append(x)
        x = self.norm(x)
        if feature_maps is not None:
            feature_maps[-1] = x  # the normed output, so the final norm gets gradients too
        return EncoderOutput(tokens=x, n_prefix=self.n_prefix, feature_maps=feature_maps)
