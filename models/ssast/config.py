"""Configuration of SSAST (Gong et al., AAAI 2022): one dataclass for every size and patch shape.

`build_model("ssast-base-patch", mask_patches=250)` gives the RankMe study's Base-Patch-250 (its
Table IV lists 250 and 400 masked patches). The pretraining pipeline passes the run's `mask_ratio`
as an override; `ssast_config_with_overrides` turns it into a patch count.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from models.config_overrides import apply_overrides
from models.layers.masking import check_mask_ratio
from models.layers.patching import FRONTEND_HOP_MS, PatchGrid
from models.ssast.cluster_masking import SSAST_CLUSTER_SIDES, check_mask_count

# SSAST's two patch shapes, as (time frames, mel bins): patch-based 16 x 16 (the reference's
# run_mask_patch.sh, fshape=tshape=16) and frame-based 128 bins x 2 frames (run_mask_frame.sh,
# fshape=128, tshape=2). Both tile the 1024 x 128 input into 512 patches of 256 values.
PATCH_SHAPES = {"patch": (16, 16), "frame": (2, 128)}


@dataclass(frozen=True, kw_only=True)
class SSASTConfig(PatchGrid):
    name: str
    encoder_dim: int
    encoder_heads: int
    encoder_depth: int = 12  # DeiT Tiny/Small/Base all have 12 blocks (reference: self.depth = 12)
    patch_shape: str = "patch"  # "patch" (16 x 16, cluster masking) | "frame" (128 x 2, random)
    # SSAST's input (run_mask_patch.sh: target_length=1024, num_mel_bins=128; dataloader.py's Kaldi
    # fbank): 128-bin log-mel, 25 ms window, 10 ms hop, 1024 frames (10.24 s), dataset-normalized.
    frontend_preset: str = "ssast"
    n_mels: int = 128
    crop_frames: int = 1024
    patch_frames: int = 16
    patch_bins: int = 16
    # Patches replaced by the mask embedding per clip: 400 is SSAST's default (run_mask_patch.sh,
    # `mask_patch=400`); the RankMe study's Table IV also trains 250.
    mask_patches: int = 400
    cluster_sides: tuple[int, ...] = SSAST_CLUSTER_SIDES  # patch-based only
    # DeiT's distilled models carry a cls and a distillation token (reference: cls_token_num = 2);
    # SSAST pretrains with both in the sequence and its pretraining loss ignores them.
    n_prefix_tokens: int = 2
    # Hidden width of the two Linear-ReLU-Linear heads; the reference uses the encoder width.
    head_hidden_dim: int | None = None
    # total = InfoNCE + generative_weight x MSE (SSAST paper, lambda = 10; traintest_mask.py
    # `loss = loss1 + 10 * loss2`)
    generative_weight: float = 10.0
    # Which encoder output `embed` returns: None = the last block's output after the final
    # LayerNorm (what the pretraining heads see); k = the output of block k (1-based), before any
    # norm, as SSAST's SUPERB upstream returns its `hidden_states`.
    embed_layer: int | None = None

    @property
    def mask_ratio(self) -> float:
        return self.mask_patches / self.n_patches

    @property
    def cluster_masking(self) -> bool:
        """Clusters for square patches, single random frames for frame patches (traintest_mask.py:
        `cluster = (args.num_mel_bins != args.fshape)`)."""
        return self.patch_shape == "patch"

    @property
    def heads_hidden_dim(self) -> int:
        return self.encoder_dim if self.head_hidden_dim is None else self.head_hidden_dim

    @property
    def decoder(self) -> str:
        """No decoder, two heads on the encoder: PatchedMelModel.lr_scale reads this (no CrossMAE)."""
        return "heads"

    def __post_init__(self) -> None:
        if self.patch_shape not in PATCH_SHAPES:
            raise ValueError(f"{self.name}: patch_shape={self.patch_shape!r}, use 'patch' or 'frame'")
        if (self.patch_frames, self.patch_bins) != PATCH_SHAPES[self.patch_shape]:
            raise ValueError(
                f"{self.name}: patch_shape={self.patch_shape!r} means {PATCH_SHAPES[self.patch_shape]} "
                f"(frames, bins) patches, got ({self.patch_frames}, {self.patch_bins}); pick the "
                "other registered variant instead of overriding the patch size"
            )
        if self.frontend_preset not in FRONTEND_HOP_MS:
            raise ValueError(
                f"{self.name}: frontend_preset={self.frontend_preset!r}, use one of {sorted(FRONTEND_HOP_MS)}"
            )
        if self.crop_frames % self.patch_frames or self.n_mels % self.patch_bins:
            raise ValueError(
                f"{self.name}: crop_frames={self.crop_frames} x n_mels={self.n_mels} does not tile "
                f"into {self.patch_frames} x {self.patch_bins} patches"
            )
        if self.encoder_dim % self.encoder_heads:
            raise ValueError(
                f"{self.name}: encoder_dim={self.encoder_dim} is not divisible by encoder_heads={self.encoder_heads}"
            )
        check_mask_count(self.n_patches, self.mask_patches)
        if self.embed_layer is not None and not 1 <= self.embed_layer <= self.encoder_depth:
            raise ValueError(
                f"{self.name}: embed_layer={self.embed_layer} must be None (last, normed) or a "
                f"block number in [1, {self.encoder_depth}]"
            )
        if self.generative_weight < 0:
            raise ValueError(f"{self.name}: generative_weight={self.generative_weight} must be >= 0")


def ssast_config_with_overrides(config: SSASTConfig, overrides: dict[str, object]) -> SSASTConfig:
    """`apply_overrides`, plus `mask_ratio` (what the pipeline passes) -> the nearest patch count.

    The ratio is applied after the other overrides, so a `crop_frames` override keeps the ratio.
    """
    overrides = dict(overrides)
    mask_ratio = overrides.pop("mask_ratio", None)
    config = apply_overrides(config, overrides)
    if mask_ratio is None:
        return config
    check_mask_ratio(mask_ratio, where=f"{config.name}: mask_ratio")
    mask_patches = round(mask_ratio * config.n_patches)
    if "mask_patches" in overrides and overrides["mask_patches"] != mask_patches:
        raise ValueError(
            f"{config.name}: mask_ratio={mask_ratio} means {mask_patches} of {config.n_patches} "
            f"patches but mask_patches={overrides['mask_patches']}; give only one of them"
        )
    return dataclasses.replace(config, mask_patches=mask_patches)
