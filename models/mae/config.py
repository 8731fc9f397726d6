"""The one configuration dataclass behind every masked-autoencoder size (MAE study, AudioMAE++).

`build_model(name, **overrides)` replaces fields of a size's config, so any encoder pairs with
either decoder: `build_model("audiomae++-base", decoder="cross", prediction_ratio=0.25)`.
"""

from __future__ import annotations

from dataclasses import dataclass

from models.layers.masking import KEPT_COUNT_TOLERANCE, check_mask_ratio
from models.layers.patching import FRONTEND_HOP_MS, PatchGrid


class CrossDecoderOptions:
    """Derived CrossMAE settings and their checks, for a config with `name`, `decoder`,
    `cross_feature_maps`, `encoder_depth`, `prediction_ratio` and `mask_ratio` fields (shared by
    every family that can use the decoder)."""

    @property
    def n_cross_feature_maps(self) -> int:
        """Encoder feature maps mixed into each decoder block (the paper's best: 6)."""
        if self.cross_feature_maps is None:
            return min(6, self.encoder_depth + 1)
        return self.cross_feature_maps

    @property
    def effective_prediction_ratio(self) -> float:
        """gamma: the prediction ratio of CrossMAE, the mask ratio for other decoders."""
        return self.mask_ratio if self.prediction_ratio is None else self.prediction_ratio

    def check_cross_decoder_options(self) -> None:
        """Raise ValueError unless `prediction_ratio` and `cross_feature_maps` fit this config;
        every family's __post_init__ calls it (the fields mean the same in each)."""
        if self.prediction_ratio is not None:
            if self.decoder != "cross":
                raise ValueError(f"{self.name}: prediction_ratio needs decoder='cross'")
            if not 0.0 < self.prediction_ratio <= self.mask_ratio + 1e-9:
                raise ValueError(
                    f"{self.name}: prediction_ratio={self.prediction_ratio} must be in "
                    f"(0, mask_ratio={self.mask_ratio}]: only removed patches can be predicted"
                )
        if self.cross_feature_maps is not None and not (1 <= self.cross_feature_maps <= self.encoder_depth + 1):
            raise ValueError(
                f"{self.name}: cross_feature_maps={self.cross_feature_maps} must be in "
                f"[1, encoder_depth + 1 = {self.encoder_depth + 1}]"
            )


@dataclass(frozen=True, kw_only=True)
class MaskedAutoencoderConfig(PatchGrid, CrossDecoderOptions):
    name: str
    frontend_preset: str  # "audiomae" | "dasheng"
    n_mels: int
    crop_frames: int  # training crop; position tables cover exactly this many frames
    patch_frames: int
    patch_bins: int
    mask_ratio: float  # fraction of patches removed from the encoder input
    block: str  # "vit" (study MAE) | "transformer++" (AudioMAE++), used by encoder and MAE decoder
    encoder_dim: int
    encoder_depth: int
    encoder_heads: int
    encoder_positions: str  # "learnable" | "learnable_time_freq" | "sincos2d" | "sincos1d"
    cls_token: bool
    encoder_rope: bool = False  # 2-D axial RoPE (time, frequency) in every encoder attention
    decoder: str = "mae"  # "mae" (self-attention over all tokens) | "cross" (CrossMAE)
    decoder_dim: int
    decoder_depth: int
    decoder_heads: int
    decoder_positions: str  # "learnable" | "learnable_time_freq" | "sincos1d" | "sincos2d"
    decoder_rope: bool = False  # 1-D RoPE over the patch index (MAE decoder only)
    # Rows of the learnable position tables when they are longer than the crop's patches (None: one
    # per patch). Dasheng sizes them for its 1008-frame target length (252 time rows in the encoder,
    # 253 in the decoder) and trains on 250-patch crops, using the first 250 rows.
    encoder_position_rows: int | None = None
    decoder_position_rows: int | None = None
    # Added before flooring N (1 - mask_ratio) into the kept count (models.layers.masking.count_kept):
    # 0 is MAE's and Dasheng's int(L * (1 - ratio)) (250 patches at 0.8 keep 49).
    kept_count_tolerance: float = KEPT_COUNT_TOLERANCE
    # Regress patches of the log-mel in dB as the front end gives it (Dasheng: `front_end(x)`, before
    # any normalisation) when the pipeline hands the model crops standardised per mel bin: the model
    # undoes that standardisation for the target with the statistics it is given
    # (`MaskedAutoencoder.set_input_standardisation`). False: the target is the crop as given.
    target_raw_db: bool = False
    # CrossMAE: fraction gamma of all patches that is decoded and scored (gamma <= mask_ratio);
    # None means every removed patch.
    prediction_ratio: float | None = None
    # CrossMAE inter-block attention: how many encoder feature maps (the encoder input and block
    # outputs, evenly spaced, always including the last) each decoder block mixes. Paper: 6 of 12;
    # None means min(6, encoder_depth + 1).
    cross_feature_maps: int | None = None
    # Regress per-patch normalized targets (mean/var over each patch's values), as Dasheng/MAE
    # norm_pix_loss; AudioMAE++ regresses the clip-normalized log-mel directly.
    normalize_target_patches: bool = False
    swiglu_norm: str = "shared"  # transformer++ only; see models/layers/blocks.py
    # Dasheng's `init_bn`: BatchNorm over mel bins (momentum 0.01) on the encoder's input, in
    # training and in `embed` (running statistics in eval mode). Loss targets stay un-normalized.
    input_batchnorm: bool = False
    # Time steps whose patches (all frequency patches of each) are kept or removed together
    # (Dasheng's grouped masking: 2); must divide n_time_patches.
    mask_group_patches: int = 1
    # The encoder layer `embed` reads out: None = the last block after the final LayerNorm (the
    # study's and the papers' readout), 0 = the patch embedding with positions, k = block k's
    # output (1-based; un-normed, except the last block's, which is the final norm's output). Lower blocks of a masked autoencoder can be the better
    # probe features (He et al., MAE Sec. 4.3); the readout study measures that per checkpoint.
    embed_layer: int | None = None
    # Anti-collapse term on the pooled visible tokens (VICReg's variance and covariance terms, Bardes
    # et al. 2022, Sec. 3 Eq. 1-4 with their gamma = 1), added to the loss with this weight; 0 = off.
    pooled_vc_weight: float = 0.0
    # The teacher-target objective (models/mae/teacher_targets.py; data2vec 2.0 / EAT): its teacher's
    # EMA decay, annealed linearly from start to end over `teacher_anneal_steps` optimizer steps.
    teacher_decay_start: float = 0.9
    teacher_decay_end: float = 0.99
    teacher_anneal_steps: int = 300
    teacher_top_blocks: int | None = None  # teacher blocks averaged into the target (None: every block)
    utterance_loss_weight: float = 1.0  # EAT's utterance-level loss on the pooled vector

    def __post_init__(self) -> None:
        if self.frontend_preset not in FRONTEND_HOP_MS:
            raise ValueError(
                f"{self.name}: frontend_preset={self.frontend_preset!r}, use one of {sorted(FRONTEND_HOP_MS)}"
            )
        if self.crop_frames % self.patch_frames or self.n_mels % self.patch_bins:
            raise ValueError(
                f"{self.name}: crop_frames={self.crop_frames} x n_mels={self.n_mels} does not tile "
                f"into {self.patch_frames} x {self.patch_bins} patches"
            )
        if self.mask_group_patches < 1 or self.n_time_patches % self.mask_group_patches:
            raise ValueError(
                f"{self.name}: mask_group_patches={self.mask_group_patches} must be a positive "
                f"divisor of the {self.n_time_patches} time patches of a crop"
            )
        check_mask_ratio(self.mask_ratio, where=f"{self.name}: mask_ratio")
        for field_name, fewest in (
            ("encoder_position_rows", self.n_time_patches),
            ("decoder_position_rows", self.n_patches),
        ):
            rows = getattr(self, field_name)
            if rows is not None and rows < fewest:
                raise ValueError(f"{self.name}: {field_name}={rows} is fewer than the crop's {fewest} positions")
        if self.decoder not in ("mae", "cross"):
            raise ValueError(f"{self.name}: decoder={self.decoder!r}, use 'mae' or 'cross'")
        self.check_cross_decoder_options()
        if self.embed_layer is not None and not 0 <= self.embed_layer <= self.encoder_depth:
            raise ValueError(
                f"{self.name}: embed_layer={self.embed_layer}: use None (last), 0 (patch embedding) or a "
                f"block number in [1, {self.encoder_depth}]"
            )
        self._check_objective_options()
        if self.decoder_rope and self.decoder == "cross":
            raise ValueError(f"{self.name}: decoder_rope applies to the MAE decoder only")

    def _check_objective_options(self) -> None:
        if self.pooled_vc_weight < 0 or self.utterance_loss_weight < 0:
            raise ValueError(f"{self.name}: pooled_vc_weight and utterance_loss_weight must not be negative")
        if not 0.0 <= self.teacher_decay_start <= self.teacher_decay_end < 1.0:
            raise ValueError(
                f"{self.name}: teacher decay must satisfy 0 <= start ({self.teacher_decay_start}) <= end "
                f"({self.teacher_decay_end}) < 1"
            )
        if self.teacher_anneal_steps < 1:
            raise ValueError(f"{self.name}: teacher_anneal_steps must be at least 1")
        if self.teacher_top_blocks is not None and not 1 <= self.teacher_top_blocks <= self.encoder_depth:
            raise ValueError(f"{self.name}: teacher_top_blocks must be in [1, encoder_depth={self.encoder_depth}]")
