"""SSAST (Gong et al., AAAI 2022): a ViT over log-mel patches pretrained by masked patch modelling.

`ssast-{tiny,small,base}-{patch,frame}`: DeiT Tiny (width 192, 3 heads), Small (384, 6) or Base
(768, 12), 12 pre-LN blocks with 4x GELU MLPs, over 1024 x 128 log-mel crops cut into 512 patches
of 16 x 16 ("patch") or 2 frames x 128 bins ("frame"). As the reference pretraining model
(ast_models.py, `pretrain_stage=True`), the sequence starts with DeiT's cls and distillation tokens
and one learnable position table covers those two and every patch.

Masking is in the input, BERT style: the embeddings of the masked patches are replaced by a
learnable mask embedding and the whole sequence is encoded (so the FLOPs count every token).
Patch models mask clusters, frame models random frames (models/ssast/cluster_masking.py); the joint
objective over the masked patches is in models/ssast/objective.py. One encoder pass feeds both
heads, as the paper's Algorithm 1; the reference code runs a separate pass, with a fresh mask, for
each objective (`pretrain_mpc` then `pretrain_mpg` in traintest_mask.py), twice our FLOPs.

Parameters (tests/models/ssast/test_ssast_model.py pins them), in millions:
    size    ours (encoder + 2 heads)   + DeiT's two unused 1000-class heads   paper / study Table IV
    tiny     5.660                      6.046                                 6M
    small   22.084                     22.854                                23M
    base    87.225                     88.763                                89M
Patch and frame variants have equal counts (both patches hold 256 values). The paper's figures
count what the reference model holds: timm's `vit_deit_*_distilled` keeps its ImageNet `head` and
`head_dist` (2 x (1000 width + 1000) parameters: 0.39M, 0.77M, 1.54M) although SSAST never calls
them (and two frozen scalars recording the input shape). We leave the heads out: unused, they
would only stall DDP. Ours round to the paper's figure for Tiny; for Small and Base those heads
are the whole gap (22.08 + 0.77 = 22.85 -> 23, 87.23 + 1.54 = 88.76 -> 89).
"""

from __future__ import annotations

import torch
from torch import nn

from models.interface import MaskedOutput, PatchedMelModel, count_parameters, patch_grid_spec
from models.layers.blocks import LAYER_NORM_EPS, build_block_stack
from models.layers.masking import gather_tokens
from models.registry import register_model
from models.ssast.cluster_masking import cluster_mask_ids, mask_from_ids, random_mask_ids
from models.ssast.config import PATCH_SHAPES, SSASTConfig, ssast_config_with_overrides
from models.ssast.objective import (
    PatchPredictionHead,
    masked_patch_info_nce,
    masked_patch_mse,
)


class SSASTEncoder(nn.Module):
    """Patch embedding, mask embedding, cls + distillation tokens, learnable positions, ViT blocks."""

    def __init__(self, config: SSASTConfig) -> None:
        super().__init__()
        dim = config.encoder_dim
        self.n_prefix = config.n_prefix_tokens
        self.patch_embed = nn.Linear(config.patch_values, dim)  # = Conv2d with stride = kernel
        self.prefix_tokens = nn.Parameter(torch.zeros(1, self.n_prefix, dim))  # cls, dist
        self.mask_embed = nn.Parameter(torch.zeros(1, 1, dim))
        # one table over the prefix tokens and every patch (reference `v.pos_embed`, 2 + 512 rows)
        self.pos_embed = nn.Parameter(torch.zeros(1, self.n_prefix + config.n_patches, dim))
        self.blocks = build_block_stack("vit", dim, config.encoder_heads, config.encoder_depth)
        self.norm = nn.LayerNorm(dim, eps=LAYER_NORM_EPS)  # timm DeiT's eps
        self._init_weights()

    def _init_weights(self) -> None:
        # timm DeiT: trunc_normal(0.02) for tokens, positions and every block Linear (zero bias).
        # SSAST then swaps in a fresh Conv2d patch embedding (PyTorch's default init, which
        # nn.Linear shares) and a xavier_normal mask embedding (ast_models.py).
        nn.init.trunc_normal_(self.prefix_tokens, std=0.02)
        nn.init.trunc_normal_(self.pos_embed, std=0.02)
        nn.init.xavier_normal_(self.mask_embed)
        for module in self.blocks.modules():
            if isinstance(module, nn.Linear):
                nn.init.trunc_normal_(module.weight, std=0.02)
                nn.init.zeros_(module.bias)

    @property
    def n_positions(self) -> int:
        return self.pos_embed.shape[1] - self.n_prefix

    def forward(
        self, patches: torch.Tensor, mask: torch.Tensor | None = None, *, blocks: int | None = None
    ) -> torch.Tensor:
        """patches (batch, n, patch_values), mask (batch, n) 1 = masked or None ->
        patch tokens (batch, n, dim): after the final LayerNorm, or the raw output of block
        `blocks` (1-based) when given. A crop shorter than the training crop uses the first
        positions (tokens are time-major, so those are its time steps)."""
        batch, n_patches, _ = patches.shape
        if n_patches > self.n_positions:
            raise ValueError(
                f"{n_patches} patches exceed the {self.n_positions} positions the encoder was "
                "built for: split long inputs into crops (model.embed does this)"
            )
        x = self.patch_embed(patches)  # (batch, n, dim)
        if mask is not None:
            x = torch.where(mask[..., None].bool(), self.mask_embed.to(x.dtype), x)
        x = torch.cat([self.prefix_tokens.expand(batch, -1, -1).to(x.dtype), x], dim=1)
        x = x + self.pos_embed[:, : self.n_prefix + n_patches]  # (batch, 2 + n, dim)
        for block in self.blocks[:blocks]:
            x = block(x)
        if blocks is None:
            x = self.norm(x)
        return x[:, self.n_prefix :]


class SSAST(PatchedMelModel):
    def __init__(self, config: SSASTConfig) -> None:
        super().__init__()
        self.config = config
        # Frames concatenate a time step's frequency patches, as the other families here. SSAST's own clip
        # feature (`ft_avgtok`) is the mean over all patch tokens: a linear map of ours, while
        # concatenation keeps which frequency band a token describes.
        self.spec = patch_grid_spec(config)
        self.encoder = SSASTEncoder(config)
        hidden, values = config.heads_hidden_dim, config.patch_values
        self.discriminative_head = PatchPredictionHead(config.encoder_dim, hidden, values)
        self.generative_head = PatchPredictionHead(config.encoder_dim, hidden, values)

    def draw_mask_ids(self, batch: int, n_patches: int, device: torch.device) -> torch.Tensor:
        """(batch, mask_patches) indices of the patches to mask, clustered for patch models."""
        config = self.config
        if config.cluster_masking:
            return cluster_mask_ids(
                batch, n_patches // config.n_freq_patches, config.n_freq_patches,
                config.mask_patches, cluster_sides=config.cluster_sides, device=device,
            )  # fmt: skip
        return random_mask_ids(batch, n_patches, config.mask_patches, device=device)

    def forward_loss(self, masked_tokens: torch.Tensor, targets: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Tokens and input patches at the masked positions -> (InfoNCE + weight x MSE, reconstructions)."""
        nce = masked_patch_info_nce(self.discriminative_head(masked_tokens), targets)
        reconstructions = self.generative_head(masked_tokens)
        loss = nce + self.config.generative_weight * masked_patch_mse(reconstructions, targets)
        return loss, reconstructions

    def forward(self, mel: torch.Tensor) -> MaskedOutput:
        patches = self.patchify(mel)  # (batch, n_patches, patch_values): inputs and targets
        batch, n_patches, n_values = patches.shape
        ids = self.draw_mask_ids(batch, n_patches, patches.device)  # (batch, mask_patches)
        mask = mask_from_ids(ids, n_patches)
        tokens = self.encoder(patches, mask)  # (batch, n_patches, dim)
        loss, reconstructions = self.forward_loss(gather_tokens(tokens, ids), gather_tokens(patches, ids))
        index = ids[..., None].expand(-1, -1, n_values)
        pred = reconstructions.new_zeros(batch, n_patches, n_values).scatter(1, index, reconstructions)
        return MaskedOutput(loss=loss, pred=pred, mask=mask, scored=mask)

    def embed(self, mel: torch.Tensor) -> torch.Tensor:
        """mel (batch, time, n_mels) -> frame features (batch, time / patch_frames, embed_dim).

        No masking; the layer is `config.embed_layer` (None: the last, after the final norm).
        Inputs longer than the training crop are encoded crop by crop (the position table
        covers one crop) and the frames concatenated; time must be a multiple of patch_frames.
        """
        patches = self.patchify(mel)
        per_crop, n_freq = self.spec.n_patches, self.config.n_freq_patches
        frames = []
        for start in range(0, patches.shape[1], per_crop):
            tokens = self.encoder(patches[:, start : start + per_crop], blocks=self.config.embed_layer)
            batch, n_tokens, _ = tokens.shape  # time-major tokens: a reshape gives frames
            frames.append(tokens.reshape(batch, n_tokens // n_freq, -1))
        return torch.cat(frames, dim=1)

    def no_weight_decay_names(self) -> set[str]:
        """Position table, cls/dist tokens and mask embedding (timm DeiT's `no_weight_decay` set)."""
        return {"encoder.pos_embed", "encoder.prefix_tokens", "encoder.mask_embed"}

    def training_flops_per_sample(self) -> float:
        """Kaplan's 6 N per token, each part counted on the tokens it processes.

        Every patch is embedded and every token (2 prefix + all patches) goes through the blocks;
        the two heads see the masked patches only. Position table, tokens and mask embedding are
        added, not multiplied; the attention and InfoNCE score products are left out, as in
        C = 6 N D.
        """
        config, encoder = self.config, self.encoder
        n_patches = config.n_patches
        flops = 6.0 * count_parameters(encoder.patch_embed) * n_patches
        blocks = count_parameters(encoder.blocks) + count_parameters(encoder.norm)
        flops += 6.0 * blocks * (n_patches + encoder.n_prefix)
        heads = count_parameters(self.discriminative_head) + count_parameters(self.generative_head)
        return flops + 6.0 * heads * config.mask_patches


# size -> (width, heads, parameters in millions as the paper and the study's Table IV give them)
SIZES = {"tiny": (192, 3, 6), "small": (384, 6, 23), "base": (768, 12, 89)}
# SSAST's default masked-patch count over 512 patches (run_mask_patch.sh, `mask_patch=400`)
DEFAULT_MASK_PATCHES = 400


def ssast_config(name: str, width: int, heads: int, patch_shape: str) -> SSASTConfig:
    patch_frames, patch_bins = PATCH_SHAPES[patch_shape]
    return SSASTConfig(
        name=name, encoder_dim=width, encoder_heads=heads, patch_shape=patch_shape,
        patch_frames=patch_frames, patch_bins=patch_bins, mask_patches=DEFAULT_MASK_PATCHES,
    )  # fmt: skip


def debug_ssast_config(patch_shape: str) -> SSASTConfig:
    """Trains on CPU in seconds: width 64, 2 blocks, 1.28 s crops (64 patches), 50 masked
    (400 / 512 x 64: the paper sizes' mask ratio)."""
    config = ssast_config(f"ssast-debug-{patch_shape}", width=64, heads=2, patch_shape=patch_shape)
    return ssast_config_with_overrides(config, {"encoder_depth": 2, "crop_frames": 128, "mask_patches": 50})


def build_ssast(config: SSASTConfig, **overrides: object) -> SSAST:
    return SSAST(ssast_config_with_overrides(config, overrides))


def _register() -> None:
    for patch_shape in PATCH_SHAPES:
        for size, (width, heads, paper_m) in SIZES.items():
            config = ssast_config(f"ssast-{size}-{patch_shape}", width, heads, patch_shape)
            register_model(
                config.name,
                lambda _config=config, **overrides: build_ssast(_config, **overrides),
                paper_parameters=f"total {paper_m}M (SSAST; study Table IV), with DeiT's unused heads",
            )
        debug = debug_ssast_config(patch_shape)
        register_model(debug.name, lambda _config=debug, **overrides: build_ssast(_config, **overrides))


_register()
