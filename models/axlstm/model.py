"""AxLSTM: a masked model of log-mel patches with bidirectional mLSTM (ViL) blocks.

Unlike MAE, masking is in place: removed patches are replaced by a learnable mask token (after the
position embedding is added, so the token carries no position; the recurrence supplies order)
and the whole sequence, cls token first, is encoded. A small MLP head reconstructs every patch.
The mask token therefore lives in the encoder, which consumes it, not in the decoder.
"""

from __future__ import annotations

import torch
from torch import nn

from models.axlstm.config import AxLSTMConfig
from models.axlstm.vil import LayerNormWithoutBias, build_vil_stack
from models.config_overrides import apply_overrides
from models.interface import MaskedOutput, PatchedMelModel, count_parameters, patch_grid_spec
from models.layers.masking import Masking, count_kept, random_masking
from models.layers.positions import PositionEmbedding
from models.mae.cross_decoder import CrossMAEDecoder, count_predicted
from models.mae.decoder import DecoderOutput
from models.mae.encoder import EncoderOutput
from models.registry import register_model


class AxLSTMEncoder(nn.Module):
    def __init__(self, config: AxLSTMConfig) -> None:
        super().__init__()
        dim = config.encoder_dim
        self.n_prefix = 1
        self.patch_embed = nn.Linear(config.patch_values, dim)  # = Conv2d with stride = kernel
        self.cls_token = nn.Parameter(torch.zeros(1, 1, dim))
        self.mask_token = nn.Parameter(torch.zeros(1, 1, dim))
        self.pos_embed = PositionEmbedding.over_grid("sincos2d", config, dim)
        self.blocks = build_vil_stack(
            dim,
            config.encoder_depth,
            expansion_factor=config.expansion_factor,
            n_heads=config.n_heads,
            mlstm_form=config.mlstm_form,
            chunk_size=config.chunk_size,
        )
        self.norm = LayerNormWithoutBias(dim)
        nn.init.normal_(self.cls_token, std=0.02)
        nn.init.normal_(self.mask_token, std=0.02)

    def forward(
        self, patches: torch.Tensor, mask: torch.Tensor | None = None, *, keep_feature_maps: bool = False
    ) -> EncoderOutput:
        """patches (batch, n, patch_values) in patch order; mask (batch, n) 1 = removed, or None."""
        batch, n_patches, _ = patches.shape
        if n_patches > self.pos_embed.n_positions:
            raise ValueError(
                f"{n_patches} patches exceed the {self.pos_embed.n_positions} "
                "positions the encoder was built for: split long inputs into crops "
                "(model.embed does this)"
            )
        x = self.pos_embed(self.patch_embed(patches))  # (batch, n, dim)
        if mask is not None:
            x = torch.where(mask[..., None].bool(), self.mask_token.to(x.dtype), x)
        x = torch.cat([self.cls_token.expand(batch, -1, -1), x], dim=1)  # (batch, 1 + n, dim)
        feature_maps = [x] if keep_feature_maps else None
        for block in self.blocks:
            x = block(x)
            if feature_maps is not None:
                feature_maps.append(x)
        x = self.norm(x)
        if feature_maps is not None:
            feature_maps[-1] = x  # the normed output, as the transformer encoder does
        return EncoderOutput(tokens=x, n_prefix=self.n_prefix, feature_maps=feature_maps)


class ReconstructionHead(nn.Module):
    """Linear(d, d) -> GELU -> Linear(d, patch values) on every patch token."""

    def __init__(self, config: AxLSTMConfig) -> None:
        super().__init__()
        dim = config.encoder_dim
        self.head = nn.Sequential(nn.Linear(dim, dim), nn.GELU(), nn.Linear(dim, config.patch_values))
        self.loss_on_all_patches = config.loss_on_all_patches

    def forward(self, encoded: EncoderOutput, masking: Masking) -> DecoderOutput:
        pred = self.head(encoded.patch_tokens)  # (batch, n_patches, patch_values)
        scored = torch.ones_like(masking.mask) if self.loss_on_all_patches else masking.mask
        return DecoderOutput(pred=pred, scored=scored)


class AxLSTM(PatchedMelModel):
    def __init__(self, config: AxLSTMConfig) -> None:
        super().__init__()
        self.config = config
        self.spec = patch_grid_spec(config)
        self.encoder = AxLSTMEncoder(config)
        if config.decoder == "cross":
            # CrossMAEDecoder reads only field names AxLSTMConfig shares with the MAE config.
            self.decoder: nn.Module = CrossMAEDecoder(config)  # type: ignore[arg-type]
        else:
            self.decoder = ReconstructionHead(config)

    def forward_encoder(self, patches: torch.Tensor) -> tuple[EncoderOutput, Masking]:
        batch, n_patches, _ = patches.shape
        masking = random_masking(batch, n_patches, self.spec.mask_ratio, device=patches.device)
        encoded = self.encoder(patches, masking.mask, keep_feature_maps=self.config.decoder == "cross")
        return encoded, masking

    def forward_loss(self, patches: torch.Tensor, decoded: DecoderOutput) -> torch.Tensor:
        """Mean squared error per patch, averaged over the scored patches."""
        per_patch = ((decoded.pred - patches) ** 2).mean(dim=-1)  # (batch, n_patches)
        return (per_patch * decoded.scored).sum() / decoded.scored.sum()

    def forward(self, mel: torch.Tensor) -> MaskedOutput:
        patches = self.patchify(mel)  # (batch, n_patches, patch_values)
        encoded, masking = self.forward_encoder(patches)
        decoded = self.decoder(encoded, masking)
        loss = self.forward_loss(patches, decoded)
        return MaskedOutput(loss=loss, pred=decoded.pred, mask=masking.mask, scored=decoded.scored)

    def embed(self, mel: torch.Tensor) -> torch.Tensor:
        """mel (batch, time, n_mels) -> frame features (batch, time / patch_frames, embed_dim).

        No masking. Longer inputs are encoded crop by crop (the position table covers one crop)
        and the frames concatenated; time must be a multiple of patch_frames.
        """
        patches = self.patchify(mel)  # raises on a time that does not tile
        per_crop = self.spec.n_patches
        frames = []
        for start in range(0, patches.shape[1], per_crop):
            tokens = self.encoder(patches[:, start : start + per_crop]).patch_tokens
            batch, n_tokens, _ = tokens.shape  # time-major tokens: a reshape gives frames
            frames.append(tokens.reshape(batch, n_tokens // self.config.n_freq_patches, -1))
        return torch.cat(frames, dim=1)

    def no_weight_decay_names(self) -> set[str]:
        """cls and mask tokens (positions are fixed buffers; biases and norms: excluded by rule)."""
        return {name for name, _ in self.named_parameters() if name.endswith(("cls_token", "mask_token"))}

    def training_flops_per_sample(self) -> float:
        """Kaplan's 6 N per token, each part counted on the tokens it processes.

        The encoder sees every patch plus the cls token (masking is in place). The mLSTM's
        sequence-mixing FLOPs (the analogue of attention scores) are left out, as in C = 6 N D.
        """
        config = self.config
        n_patches = config.n_patches
        n_tokens = n_patches + self.encoder.n_prefix
        encoder = self.encoder
        flops = 6.0 * count_parameters(encoder.patch_embed) * n_patches
        encoder_blocks = count_parameters(encoder.blocks) + count_parameters(encoder.norm)
        flops += 6.0 * encoder_blocks * n_tokens
        decoder = self.decoder
        if isinstance(decoder, CrossMAEDecoder):
            n_removed = n_patches - count_kept(n_patches, config.mask_ratio)
            n_predict = count_predicted(n_patches, n_removed, config.mask_ratio, decoder.prediction_ratio)
            key_value = sum(count_parameters(block.cross_attn.kv) for block in decoder.blocks)
            query_side = (
                count_parameters(decoder.blocks)
                - key_value
                + count_parameters(decoder.norm)
                + count_parameters(decoder.head)
            )
            flops += 6.0 * key_value * n_tokens + 6.0 * query_side * n_predict
        else:
            flops += 6.0 * count_parameters(decoder) * n_patches
        return flops


# size -> (width, total parameters in millions with E=2, with E=3), authors' code (models.md)
SIZES = {
    "tiny": (192, 2.92, 4.34),
    "small": (384, 11.22, 16.72),
    "base": (768, 43.96, 65.59),
}


def _register() -> None:
    for size, (width, params_e2, params_e3) in SIZES.items():
        config = AxLSTMConfig(name=f"axlstm-{size}", encoder_dim=width)
        register_model(
            config.name,
            lambda _config=config, **overrides: AxLSTM(apply_overrides(_config, overrides)),
            paper_parameters=f"total {params_e3}M (E=3), {params_e2}M (E=2)",
        )
    debug = AxLSTMConfig(
        name="axlstm-debug",
        encoder_dim=48,
        encoder_depth=2,
        expansion_factor=2,
        decoder_dim=32,
        decoder_depth=1,
        decoder_heads=2,
    )
    register_model("axlstm-debug", lambda **overrides: AxLSTM(apply_overrides(debug, overrides)))


_register()
