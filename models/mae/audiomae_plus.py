"""AudioMAE++: transformer++ blocks, 80-mel 2 s crops, 4 x 16 patches (250), cls token, mask 0.8.

Fixed 2-D sin-cos positions in the encoder, 1-D in the decoder (buffers, not parameters).
Decoder: 4 transformer++ blocks, 8 heads, width 384 (512 for Large).
"""

from __future__ import annotations

from models.config_overrides import apply_overrides
from models.mae.config import MaskedAutoencoderConfig
from models.mae.masked_autoencoder import MaskedAutoencoder
from models.registry import register_model

# size -> (encoder width, depth, heads, decoder width, paper encoder parameters in millions)
SIZES = {
    "tiny": (192, 12, 3, 384, None),
    "base": (768, 12, 12, 384, 141.9),
    "large": (1024, 24, 16, 512, 504.0),
}


def audiomae_plus_config(name: str, width: int, depth: int, heads: int, decoder_width: int) -> MaskedAutoencoderConfig:
    return MaskedAutoencoderConfig(
        name=name,
        frontend_preset="audiomae",
        n_mels=80,
        crop_frames=200,  # 2 s -> 50 x 5 patches
        patch_frames=4,
        patch_bins=16,
        mask_ratio=0.8,
        block="transformer++",
        encoder_dim=width,
        encoder_depth=depth,
        encoder_heads=heads,
        encoder_positions="sincos2d",
        cls_token=True,
        decoder_dim=decoder_width,
        decoder_depth=4,
        decoder_heads=8,
        decoder_positions="sincos1d",
        normalize_target_patches=False,  # MSE on the clip-normalized log-mel
    )


def _register() -> None:
    for size, (width, depth, heads, decoder_width, encoder_m) in SIZES.items():
        name = f"audiomae++-{size}"
        config = audiomae_plus_config(name, width, depth, heads, decoder_width)
        register_model(
            name,
            lambda _config=config, **overrides: MaskedAutoencoder(apply_overrides(_config, overrides)),
            paper_parameters=f"encoder {encoder_m}M (paper Table 2)" if encoder_m else "",
        )
    debug = audiomae_plus_config("audiomae++-debug", width=48, depth=2, heads=3, decoder_width=32)
    debug = apply_overrides(debug, {"decoder_depth": 1, "decoder_heads": 2})
    register_model("audiomae++-debug", lambda **overrides: MaskedAutoencoder(apply_overrides(debug, overrides)))


_register()
