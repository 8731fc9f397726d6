"""Masked autoencoder over log-mel patches: the study's MAE and AudioMAE++, MAE or CrossMAE decoder."""

from __future__ import annotations

import torch
from torch import nn

from models.interface import MaskedOutput, PatchedMelModel, count_parameters, patch_grid_spec
from models.layers.anti_collapse import variance_covariance_penalty
from models.layers.masking import Masking, count_kept, random_masking
from models.layers.positions import PositionEmbedding
from models.mae.config import MaskedAutoencoderConfig
from models.mae.cross_decoder import CrossMAEDecoder, count_predicted
from models.mae.decoder import DecoderOutput, SelfAttentionDecoder
from models.mae.encoder import EncoderOutput, PatchEncoder


class MaskedAutoencoder(PatchedMelModel):
    def __init__(self, config: MaskedAutoencoderConfig) -> None:
        super().__init__()
        self.config = config
        self.spec = patch_grid_spec(config)
        self.encoder = PatchEncoder(config)
        if config.decoder == "cross":
            self.decoder: nn.Module = CrossMAEDecoder(config)
        else:
            self.decoder = SelfAttentionDecoder(config)
        # The per-bin standardisation of the crops this model is fed (identity until set), undone
        # for a raw-dB target. Not saved: the trainer sets it from the shards at every start.
        self.register_buffer("input_bin_mean", torch.zeros(config.n_mels), persistent=False)
        self.register_buffer("input_bin_std", torch.ones(config.n_mels), persistent=False)

    def set_input_standardisation(self, bin_mean: torch.Tensor, bin_std: torch.Tensor) -> None:
        """The per-bin mean and std the crops were standardised with (the shard manifest's)."""
        self.input_bin_mean.copy_(torch.as_tensor(bin_mean, dtype=torch.float32))
        self.input_bin_std.copy_(torch.as_tensor(bin_std, dtype=torch.float32))

    def target_mel(self, mel: torch.Tensor) -> torch.Tensor:
        """The log-mel the loss regresses: the crop as given, or its dB (`target_raw_db`)."""
        if not self.config.target_raw_db:
            return mel
        return mel * self.input_bin_std + self.input_bin_mean

    def forward_encoder(self, patches: torch.Tensor, mask_ratio: float) -> tuple[EncoderOutput, Masking]:
        batch, n_patches, _ = patches.shape
        # a masking group: mask_group_patches time steps with all their frequency patches
        group_tokens = self.config.mask_group_patches * self.config.n_freq_patches
        masking = random_masking(
            batch, n_patches, mask_ratio, group_tokens=group_tokens, device=patches.device,
            kept_tolerance=self.config.kept_count_tolerance,
        )  # fmt: skip
        keep_maps = self.config.decoder == "cross"
        encoded = self.encoder(patches, masking.ids_keep, keep_feature_maps=keep_maps)
        return encoded, masking

    def forward_decoder(self, encoded: EncoderOutput, masking: Masking) -> DecoderOutput:
        return self.decoder(encoded, masking)

    def forward_loss(self, patches: torch.Tensor, decoded: DecoderOutput) -> torch.Tensor:
        """Mean squared error per patch, averaged over the scored patches only."""
        target = patches
        if self.config.normalize_target_patches:
            mean = target.mean(dim=-1, keepdim=True)
            var = target.var(dim=-1, keepdim=True)
            target = (target - mean) / (var + 1e-6) ** 0.5
        per_patch = ((decoded.pred - target) ** 2).mean(dim=-1)  # (batch, n_patches)
        return (per_patch * decoded.scored).sum() / decoded.scored.sum()

    def forward(self, mel: torch.Tensor) -> MaskedOutput:
        # Targets are the patches before the input BatchNorm: Dasheng's AudioTransformerMAE.forward
        # takes them from `front_end(x)` again, without `init_bn` (the encoder's input has it).
        targets = self.patchify(self.target_mel(mel))  # (batch, n_patches, patch_values)
        patches = self.patchify(self.encoder.normalize_mel(mel))
        encoded, masking = self.forward_encoder(patches, self.spec.mask_ratio)
        decoded = self.forward_decoder(encoded, masking)
        loss = self.forward_loss(targets, decoded) + self.anti_collapse_loss(encoded)
        return MaskedOutput(loss=loss, pred=decoded.pred, mask=masking.mask, scored=decoded.scored)

    def anti_collapse_loss(self, encoded: EncoderOutput) -> torch.Tensor | float:
        """`pooled_vc_weight` x the variance-covariance penalty of the time-averaged visible tokens:
        the vector the probes read, kept from collapsing onto few directions. 0 when off."""
        if self.config.pooled_vc_weight == 0.0:
            return 0.0
        return self.config.pooled_vc_weight * variance_covariance_penalty(encoded.patch_tokens.mean(dim=1))

    def after_optimizer_step(self) -> None:
        """Called by the training loop after every optimizer step; nothing to do for a plain MAE."""

    def embed(self, mel: torch.Tensor) -> torch.Tensor:
        """mel (batch, time, n_mels) -> frame features (batch, time / patch_frames, embed_dim).

        No masking. Inputs longer than the training crop are encoded crop by crop (the position
        tables cover one crop) and the frames concatenated; time must be a multiple of patch_frames.
        The layer read out is `config.embed_layer` (None: the last, after the final norm).
        """
        self.patchify(mel)  # raises on a shape that does not tile, before the BatchNorm sees it
        patches = self.patchify(self.encoder.normalize_mel(mel))
        per_crop = self.spec.n_patches
        frames = []
        for start in range(0, patches.shape[1], per_crop):
            tokens = self._embed_tokens(patches[:, start : start + per_crop])
            batch, n_tokens, dim = tokens.shape  # tokens are time-major: a reshape gives frames
            frames.append(tokens.reshape(batch, n_tokens // self.config.n_freq_patches, -1))
        return torch.cat(frames, dim=1)

    def _embed_tokens(self, patches: torch.Tensor) -> torch.Tensor:
        """The patch tokens (batch, n, dim) of `config.embed_layer`, prefix tokens dropped."""
        layer = self.config.embed_layer
        output = self.encoder(patches, keep_feature_maps=layer is not None)
        if layer is None:
            return output.patch_tokens
        return output.feature_maps[layer][:, output.n_prefix :]

    def no_weight_decay_names(self) -> set[str]:
        """Learnable position tables, cls and mask tokens (biases and norms: excluded by rule)."""
        names = {name for name, _ in self.named_parameters() if name.endswith(("cls_token", "mask_token"))}
        for module_name, module in self.named_modules():
            if isinstance(module, PositionEmbedding):  # sin-cos tables are buffers: nothing added
                names.update(name for name, _ in module.named_parameters(prefix=module_name))
        return names

    def training_flops_per_sample(self) -> float:
        """Kaplan's 6 N per token, each part counted on the tokens it actually processes.

        N counts weight matrices and biases (not position tables, cls or mask tokens: they are
        added, not multiplied; nor the input BatchNorm's 2 x n_mels scale and shift, applied per
        mel value before the patch embedding, like an embedding); attention-score FLOPs are left
        out, as in Kaplan's C = 6 N D.
        """
        config = self.config
        n_patches = config.n_patches
        n_keep = count_kept(n_patches, config.mask_ratio, tolerance=config.kept_count_tolerance)
        n_prefix = self.encoder.n_prefix
        encoder_blocks = count_parameters(self.encoder.blocks) + count_parameters(self.encoder.norm)
        flops = 6.0 * count_parameters(self.encoder.patch_embed) * n_keep
        flops += 6.0 * encoder_blocks * (n_keep + n_prefix)
        decoder = self.decoder
        if isinstance(decoder, CrossMAEDecoder):
            n_predict = count_predicted(n_patches, n_patches - n_keep, config.mask_ratio, decoder.prediction_ratio)
            key_value = sum(count_parameters(block.cross_attn.kv) for block in decoder.blocks)
            query_side = (
                count_parameters(decoder.blocks)
                - key_value
                + count_parameters(decoder.norm)
                + count_parameters(decoder.head)
            )
            flops += 6.0 * key_value * (n_keep + n_prefix) + 6.0 * query_side * n_predict
        else:
            flops += 6.0 * count_parameters(decoder.embed) * (n_keep + n_prefix)
            rest = count_parameters(decoder.blocks) + count_parameters(decoder.norm)
            flops += 6.0 * (rest + count_parameters(decoder.head)) * (n_patches + n_prefix)
        return flops
