"""Configuration of the AxLSTM masked model: one dataclass for every size; overrides replace fields.

`build_model("axlstm-base", expansion_factor=2)` reproduces the authors' public code;
`build_model("axlstm-base", decoder="cross", prediction_ratio=0.25)` swaps the MLP head for the
CrossMAE decoder (models/mae/cross_decoder.py), which reads the same field names as the MAE config.
"""

from __future__ import annotations

from dataclasses import dataclass

from models.axlstm.mlstm import DEFAULT_CHUNK_SIZE
from models.layers.masking import check_mask_ratio
from models.layers.patching import FRONTEND_HOP_MS, PatchGrid
from models.mae.config import CrossDecoderOptions


@dataclass(frozen=True, kw_only=True)
class AxLSTMConfig(PatchGrid, CrossDecoderOptions):
    name: str
    encoder_dim: int
    encoder_depth: int = 12
    # Inner width of the mLSTM layer = expansion_factor * encoder_dim. The paper's ablation
    # favours 3; the authors' public code defaults to 2 (models.md).
    expansion_factor: int = 3
    n_heads: int = 4  # mLSTM heads per layer
    # Same input as AudioMAE++: 80-mel log-mel, 2 s crops, 4 x 16 patches (50 x 5 = 250), cls token.
    frontend_preset: str = "audiomae"
    n_mels: int = 80
    crop_frames: int = 200
    patch_frames: int = 4
    patch_bins: int = 16
    mask_ratio: float = 0.5  # in place: removed patches become the mask token, all are encoded
    # "parallel" materializes the (S x S) decay matrix; "chunkwise" carries the memory across
    # chunks of `chunk_size` and is faster for long sequences (benchmarks/bench_mlstm.py).
    mlstm_form: str = "parallel"
    chunk_size: int = DEFAULT_CHUNK_SIZE
    # The authors' code averages the loss over every patch; the paper's objective (and our
    # default) scores only the masked ones.
    loss_on_all_patches: bool = False
    decoder: str = "head"  # "head": Linear(d, d) -> GELU -> Linear(d, patch values) | "cross"
    # CrossMAE decoder only (AudioMAE++'s decoder sizes).
    decoder_dim: int = 384
    decoder_depth: int = 4
    decoder_heads: int = 8
    decoder_positions: str = "sincos1d"
    prediction_ratio: float | None = None
    cross_feature_maps: int | None = None

    def __post_init__(self) -> None:
        if self.frontend_preset not in FRONTEND_HOP_MS:
            raise ValueError(
                f"{self.name}: frontend_preset={self.frontend_preset!r}, use one of {sorted(FRONTEND_HOP_MS)}"
            )
        if self.crop_frames % self.patch_frames or self.n_mels % self.patch_bins:
            raise ValueError(
                f"{self.name}: crop_frames={self.crop_frames} x n_mels={self.n_mels} "
                f"does not tile into {self.patch_frames} x {self.patch_bins} patches"
            )
        if self.encoder_dim % 4:
            raise ValueError(
                f"{self.name}: encoder_dim={self.encoder_dim} must be a multiple of 4 (2-D sin-cos positions)"
            )
        inner_dim = self.expansion_factor * self.encoder_dim
        if self.expansion_factor < 1 or inner_dim % (4 * self.n_heads):
            raise ValueError(
                f"{self.name}: expansion_factor={self.expansion_factor} x encoder_dim="
                f"{self.encoder_dim} must split into n_heads={self.n_heads} heads of "
                "whole 4 x 4 projection blocks"
            )
        check_mask_ratio(self.mask_ratio, where=f"{self.name}: mask_ratio")
        if self.mlstm_form not in ("parallel", "chunkwise"):
            raise ValueError(f"{self.name}: mlstm_form={self.mlstm_form!r}, use 'parallel' or 'chunkwise'")
        if self.chunk_size < 1:
            raise ValueError(f"{self.name}: chunk_size={self.chunk_size} must be positive")
        if self.decoder not in ("head", "cross"):
            raise ValueError(f"{self.name}: decoder={self.decoder!r}, use 'head' or 'cross'")
        self.check_cross_decoder_options()
        if self.decoder == "cross" and self.loss_on_all_patches:
            raise ValueError(
                f"{self.name}: loss_on_all_patches needs decoder='head' (CrossMAE predicts removed patches only)"
            )
