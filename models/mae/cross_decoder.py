"""CrossMAE decoder: mask-token queries cross-attend to encoder features, never to each other.

Because decoded tokens never see each other, only gamma * N of the removed patches need decoding
(partial reconstruction), and the result for any patch is the same whichever others are decoded.
Each decoder block attends to its own learned mix of selected encoder feature maps (inter-block
attention), followed by that block's LayerNorm.
"""

from __future__ import annotations

import torch
from torch import nn

from models.layers.attention import CrossAttention
from models.layers.blocks import LAYER_NORM_EPS, FeedForward
from models.layers.masking import Masking
from models.layers.positions import PositionEmbedding
from models.mae.config import MaskedAutoencoderConfig
from models.mae.decoder import DecoderOutput
from models.mae.encoder import EncoderOutput


def select_feature_maps(encoder_depth: int, n_maps: int) -> list[int]:
    """Evenly spaced indices into the depth + 1 encoder maps (input, block 1..depth), last included."""
    if n_maps == 1:
        return [encoder_depth]
    step = encoder_depth / (n_maps - 1)
    return [round(i * step) for i in range(n_maps)]


def count_predicted(n_patches: int, n_removed: int, mask_ratio: float, prediction_ratio: float) -> int:
    """Patches the CrossMAE decoder predicts: all removed ones when gamma = p, else floor(gamma N)."""
    if prediction_ratio >= mask_ratio - 1e-9:
        return n_removed
    return max(1, min(n_removed, int(n_patches * prediction_ratio + 1e-6)))


class CrossBlock(nn.Module):
    """x + CrossAttn(LN(x), context); x + MLP(LN(x)): no self-attention among queries."""

    def __init__(self, dim: int, context_dim: int, n_heads: int) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(dim, eps=LAYER_NORM_EPS)
        self.cross_attn = CrossAttention(dim, context_dim, n_heads)
        self.norm2 = nn.LayerNorm(dim, eps=LAYER_NORM_EPS)
        self.mlp = FeedForward(dim, 4 * dim, nn.GELU)

    def forward(self, queries: torch.Tensor, context: torch.Tensor) -> torch.Tensor:
        queries = queries + self.cross_attn(self.norm1(queries), context)
        return queries + self.mlp(self.norm2(queries))


class CrossMAEDecoder(nn.Module):
    """Holds the mask token, the decoder position embedding and the prediction head."""

    def __init__(self, config: MaskedAutoencoderConfig) -> None:
        super().__init__()
        dim, context_dim = config.decoder_dim, config.encoder_dim
        self.mask_ratio = config.mask_ratio
        self.prediction_ratio = config.effective_prediction_ratio
        self.mask_token = nn.Parameter(torch.zeros(1, 1, dim))
        self.pos_embed = PositionEmbedding.over_grid(config.decoder_positions, config, dim)
        self.feature_map_ids = select_feature_maps(config.encoder_depth, config.n_cross_feature_maps)
        # Row k: how decoder block k weighs the selected encoder maps. Starts as their mean.
        self.feature_mix = nn.Linear(len(self.feature_map_ids), config.decoder_depth, bias=False)
        self.context_norms = nn.ModuleList(
            nn.LayerNorm(context_dim, eps=LAYER_NORM_EPS) for _ in range(config.decoder_depth)
        )
        self.blocks = nn.ModuleList(
            CrossBlock(dim, context_dim, config.decoder_heads) for _ in range(config.decoder_depth)
        )
        self.norm = nn.LayerNorm(dim, eps=LAYER_NORM_EPS)
        self.head = nn.Linear(dim, config.patch_values)
        nn.init.normal_(self.mask_token, std=0.02)
        for module in self.modules():
            if isinstance(module, nn.Linear) and module is not self.feature_mix:
                nn.init.xavier_uniform_(module.weight)
                nn.init.zeros_(module.bias)
        nn.init.constant_(self.feature_mix.weight, 1.0 / len(self.feature_map_ids))

    def predict(self, encoded: EncoderOutput, ids_predict: torch.Tensor) -> torch.Tensor:
        """Predictions (batch, m, patch_values) for the patches ids_predict (batch, m)."""
        if encoded.feature_maps is None:
            raise ValueError("CrossMAE needs the encoder's feature maps (keep_feature_maps=True)")
        maps = torch.stack([encoded.feature_maps[i] for i in self.feature_map_ids], dim=-1)
        contexts = self.feature_mix(maps)  # (batch, n_ctx, context_dim, decoder_depth)
        queries = self.mask_token + self.pos_embed.at(ids_predict)  # (batch, m, dim)
        for depth, (block, norm) in enumerate(zip(self.blocks, self.context_norms)):
            queries = block(queries, norm(contexts[..., depth]))
        return self.head(self.norm(queries))

    def forward(self, encoded: EncoderOutput, masking: Masking) -> DecoderOutput:
        batch, n_patches = masking.ids_shuffle.shape
        n_predict = count_predicted(n_patches, n_patches - masking.n_keep, self.mask_ratio, self.prediction_ratio)
        # ids_removed is in random order, so its prefix is a random subset of the removed patches.
        ids_predict = masking.ids_removed[:, :n_predict]  # (batch, n_predict)
        rows = self.predict(encoded, ids_predict)  # (batch, n_predict, patch_values)
        pred = rows.new_zeros(batch, n_patches, rows.shape[-1])
        pred = pred.scatter(1, ids_predict[..., None].expand(-1, -1, rows.shape[-1]), rows)
        scored = masking.mask.new_zeros(batch, n_patches).scatter(1, ids_predict, 1.0)
        return DecoderOutput(pred=pred, scored=scored)
