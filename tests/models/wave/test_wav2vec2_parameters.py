"""wav2vec 2.0 and wav2vec2-conformer sizes against torchaudio's encoder stacks, the pretraining
heads counted by hand, and the study's Table IV (95M / 317M).

The conformer rows of Table IV say 317M, the wav2vec 2.0 Large figure; the architecture they name
(24 conformer blocks of width 1024, FFN 4096, fairseq wav2vec2_conformer_large_librivox.yaml and
Hugging Face's facebook/wav2vec2-conformer-{rel-pos,rope}-large configs) has two macaron FFNs and
a convolution module per block, 25.2M (rel_pos) / 24.2M (rope) parameters against a transformer
block's 12.6M, so 612.1M / 586.9M here. The released checkpoints add an unused position conv
(8,389,760) on top: 620.5M / 595.3M, i.e. 2.48 GB / 2.38 GB of float32 - the sizes of
facebook/wav2vec2-conformer-{rel-pos,rope}-large's pytorch_model.bin on Hugging Face. Table IV's
317M cannot be these models' count; it repeats wav2vec 2.0 Large's.
"""

from __future__ import annotations

import pytest
import torch
from torchaudio.models import wav2vec2_base, wav2vec2_large, wav2vec2_large_lv60k

import models


def _meta(name: str, **overrides: object) -> torch.nn.Module:
    with torch.device("meta"):
        return models.build_model(name, **overrides)


def _pretraining_heads(conv_channels: int, dim: int, final_dim: int) -> int:
    """quantizer logits (C -> 2 x 320) + codebooks (640 x final_dim / 2) + project_q + final_proj
    + the mask embedding."""
    logits = conv_channels * 640 + 640
    codebooks = 640 * final_dim // 2
    return logits + codebooks + (final_dim * final_dim + final_dim) + (dim * final_dim + final_dim) + dim


@pytest.mark.parametrize(
    "name,builder,final_dim,total",
    [
        ("wav2vec2-base", wav2vec2_base, 256, 95_044_608),
        ("wav2vec2-large", wav2vec2_large_lv60k, 768, 317_390_592),
    ],
)
def test_encoder_equals_torchaudio_and_heads_complete_table_iv(name, builder, final_dim, total) -> None:
    model = _meta(name)
    with torch.device("meta"):
        reference = builder()
    encoder = models.count_parameters(model.encoder)
    assert encoder == sum(p.numel() for p in reference.parameters())
    heads = _pretraining_heads(512, model.spec.embed_dim, final_dim)
    assert models.count_parameters(model) == encoder + heads == total
    assert round(total / 1e6) == (95 if name == "wav2vec2-base" else 317)  # Table IV


def test_heads_are_673_664_for_base_and_1_952_896_for_large() -> None:
    assert _pretraining_heads(512, 768, 256) == 673_664
    assert _pretraining_heads(512, 1024, 768) == 1_952_896


def test_large_with_base_extractor_equals_torchaudio_wav2vec2_large() -> None:
    # the paper's LibriSpeech Large: group-norm extractor, no conv bias, post-LN
    model = _meta("wav2vec2-large", extractor_mode="group_norm", conv_bias=False, layer_norm_first=False)
    with torch.device("meta"):
        reference = wav2vec2_large()
    assert models.count_parameters(model.encoder) == sum(p.numel() for p in reference.parameters()) == 315_427_968


@pytest.mark.parametrize(
    "name,total",
    [
        ("wav2vec2-conformer-large-relpos", 612_121_216),
        ("wav2vec2-conformer-large-rope", 586_906_240),
    ],
)
def test_conformer_large_counts(name: str, total: int) -> None:
    model = _meta(name)
    per_block = 25_226_240 if name.endswith("relpos") else 24_175_616
    # layer-norm extractor with bias (4,210,176) + projection (526,336) + 24 blocks + final LN
    encoder = 4_210_176 + 526_336 + 24 * per_block + 2 * 1024
    assert models.count_parameters(model.encoder) == encoder
    assert models.count_parameters(model) == encoder + _pretraining_heads(512, 1024, 768) == total
    assert total > 1.8 * 317e6  # not Table IV's 317M (see the module docstring)


def test_transformer_block_is_half_a_conformer_block() -> None:
    large = _meta("wav2vec2-large").encoder.context.layers[0]
    assert sum(p.numel() for p in large.parameters()) == 12_596_224  # 4 (d^2 + d) + 2 d f + d + f + 4 d
