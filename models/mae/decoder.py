"""The MAE decoder: self-attention over visible tokens plus mask tokens at every patch position."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from models.layers.blocks import LAYER_NORM_EPS, build_block_stack
from models.layers.masking import Masking, gather_tokens
from models.layers.positions import PositionEmbedding
from models.layers.rope import rotary_angles
from models.mae.config import MaskedAutoencoderConfig
from models.mae.encoder import EncoderOutput


@dataclass(frozen=True)
class DecoderOutput:
    pred: torch.Tensor  # (batch, n_patches, patch_values); zero where not decoded
    scored: torch.Tensor  # (batch, n_patches) float, 1 = patch in the loss


class SelfAttentionDecoder(nn.Module):
    """Holds the mask token, the decoder position embedding and the prediction head."""

    def __init__(self, config: MaskedAutoencoderConfig) -> None:
        super().__init__()
        dim = config.decoder_dim
        self.embed = nn.Linear(config.encoder_dim, dim)
        self.mask_token = nn.Parameter(torch.zeros(1, 1, dim))
        self.pos_embed = PositionEmbedding.over_grid(
            config.decoder_positions, config, dim, rows=config.decoder_position_rows
        )
        self.blocks = build_block_stack(
            config.block, dim, config.decoder_heads, config.decoder_depth, swiglu_norm=config.swiglu_norm
        )
        self.norm = nn.LayerNorm(dim, eps=LAYER_NORM_EPS)
        self.head = nn.Linear(dim, config.patch_values)
        self.head_dim = dim // config.decoder_heads
        self.use_rope = config.decoder_rope
        nn.init.normal_(self.mask_token, std=0.02)
        for module in self.modules():
            if isinstance(module, nn.Linear):
                nn.init.xavier_uniform_(module.weight)
                nn.init.zeros_(module.bias)

    def forward(self, encoded: EncoderOutput, masking: Masking) -> DecoderOutput:
        x = self.embed(encoded.tokens)  # (batch, n_prefix + n_keep, dim)
        prefix, visible = x[:, : encoded.n_prefix], x[:, encoded.n_prefix :]
        batch, n_patches = masking.ids_restore.shape
        mask_tokens = self.mask_token.expand(batch, n_patches - masking.n_keep, -1)
        x = torch.cat([visible, mask_tokens], dim=1)  # (batch, n_patches, dim), shuffled order
        x = self.pos_embed(gather_tokens(x, masking.ids_restore))  # back to patch order
        x = torch.cat([prefix, x], dim=1)
        rope = None
        if self.use_rope:
            # 1-D positions: patch index + 1, the cls token alone at 0.
            positions = torch.arange(x.shape[1], device=x.device) + 1 - encoded.n_prefix
            rope = rotary_angles(positions[None, :, None], self.head_dim)
        for block in self.blocks:
            x = block(x, rope)
        pred = self.head(self.norm(x))[:, encoded.n_prefix :]  # (batch, n_patches, patch_values)
        return DecoderOutput(pred=pred, scored=masking.mask)
