"""The wav2vec2-conformer context network: dropout -> conformer blocks -> LayerNorm.

fairseq ConformerEncoder.extract_features (and Hugging Face Wav2Vec2ConformerEncoder.forward):
with relative or rotary positions in every block, the convolutional position embedding of the
transformer encoder is not applied; the blocks are pre-LN (layer_norm_first, as every released
conformer config), so one LayerNorm follows the last block. Both references still construct the
unused position convolution (their checkpoints carry its 8,389,760 weights at width 1024); it is
left out here, since it changes no output and unused parameters would stall DDP.

Checked once against Hugging Face's Wav2Vec2ConformerModel (transformers 4.46.3, not a
dependency) with its weights copied in, rel_pos and rotary, width 64 x 2 blocks: encoder outputs
equal to 1.7e-6.

Returns the same ContextOutput as WaveContextEncoder, so `embed_layer` works alike (block k's
output is the block's own final-LayerNorm output; `last` adds the encoder's LayerNorm).
"""

from __future__ import annotations

import torch
from torch import nn

from models.wave.conformer_block import DEPTHWISE_KERNEL, ConformerBlock
from models.wave.context import ContextOutput, init_linear_like_bert


class ConformerContextEncoder(nn.Module):
    def __init__(
        self,
        *,
        dim: int,
        depth: int,
        n_heads: int,
        ffn_dim: int,
        position: str,
        kernel_size: int = DEPTHWISE_KERNEL,
        dropout: float = 0.0,
        attention_dropout: float = 0.0,
    ) -> None:
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.layers = nn.ModuleList(
            ConformerBlock(
                dim,
                n_heads,
                ffn_dim,
                position=position,
                kernel_size=kernel_size,
                dropout=dropout,
                attention_dropout=attention_dropout,
            )
            for _ in range(depth)
        )
        self.layer_norm = nn.LayerNorm(dim)
        self.layers.apply(init_linear_like_bert)  # fairseq ConformerEncoder: apply(init_bert_params)

    def forward(self, x: torch.Tensor) -> ContextOutput:
        """x (batch, frames, dim) projected features -> ContextOutput."""
        x = self.dropout(x)
        outputs = []
        for layer in self.layers:
            x = layer(x)
            outputs.append(x)
        return ContextOutput(last=self.layer_norm(x), layers=tuple(outputs))

    def training_flops_per_sample(self, n_frames: int) -> float:
        """6 x weights x frames (BatchNorm and the depthwise conv included: one output per frame),
        except the rel-pos projection, which runs on the 2T - 1 rows of the relative table."""
        table_weights = sum(
            layer.attention.linear_pos.weight.numel() for layer in self.layers if hasattr(layer.attention, "linear_pos")
        )
        frame_weights = sum(p.numel() for p in self.parameters()) - table_weights
        return 6.0 * (frame_weights * n_frames + table_weights * (2 * n_frames - 1))
