"""The context network: the convolutional position term, post-LN vs pre-LN, layer selection."""

from __future__ import annotations

import pytest
import torch

from models.wave.context import ConvolutionalPositionEmbedding, WaveContextEncoder


def _context(layer_norm_first: bool, depth: int = 3) -> WaveContextEncoder:
    torch.manual_seed(0)
    return WaveContextEncoder(dim=32, depth=depth, n_heads=4, ffn_dim=64, layer_norm_first=layer_norm_first).eval()


def test_position_term_keeps_the_frame_count_and_reaches_64_frames_back_63_ahead() -> None:
    torch.manual_seed(0)
    position = ConvolutionalPositionEmbedding(32)  # kernel 128, 16 groups
    x = torch.randn(1, 300, 32)
    base = position(x)
    assert base.shape == (1, 300, 32)  # padding 64 gives 301 outputs; the last is dropped
    changed = x.clone()
    changed[0, 100] += 1.0
    delta = (position(changed) - base).abs().amax(dim=-1)[0]
    reached = torch.nonzero(delta > 0).flatten()
    # y[t] = sum_k w[k] x[t + k - 64], k in [0, 128): frame 100 reaches t in [37, 164]
    assert (reached.min().item(), reached.max().item()) == (37, 164)


def test_position_conv_is_weight_normalised_over_the_kernel_axis() -> None:
    position = ConvolutionalPositionEmbedding(768)
    shapes = {name: tuple(p.shape) for name, p in position.named_parameters()}
    # weight_norm(dim=2): one gain per kernel tap, a direction of 768 x 48 x 128
    assert shapes == {
        "conv.bias": (768,),
        "conv.parametrizations.weight.original0": (1, 1, 128),
        "conv.parametrizations.weight.original1": (768, 48, 128),
    }


def test_post_ln_blocks_end_normalised_and_the_output_is_the_last_block() -> None:
    output = _context(layer_norm_first=False)(torch.randn(2, 50, 32))
    last = output.layers[-1]
    torch.testing.assert_close(last.mean(-1), torch.zeros(2, 50), atol=1e-5, rtol=0)
    assert torch.equal(output.last, last)


def test_pre_ln_output_gets_the_final_layer_norm_blocks_do_not() -> None:
    context = _context(layer_norm_first=True)
    output = context(torch.randn(2, 50, 32))
    assert output.layers[-1].mean(-1).abs().max() > 1e-2  # a raw residual stream
    torch.testing.assert_close(output.last, context.layer_norm(output.layers[-1]))


def test_select_picks_a_block_by_its_one_based_number() -> None:
    output = _context(layer_norm_first=False)(torch.randn(1, 20, 32))
    assert output.select(None) is output.last
    assert output.select(1) is output.layers[0]
    assert output.select(3) is output.layers[2]
    with pytest.raises(ValueError, match=r"\[1, 3\]"):
        output.select(4)
    with pytest.raises(ValueError, match="embed_layer=0"):
        output.select(0)


def test_eval_output_is_deterministic_and_dropout_acts_in_training() -> None:
    torch.manual_seed(0)
    context = WaveContextEncoder(
        dim=32, depth=2, n_heads=4, ffn_dim=64, layer_norm_first=False, dropout=0.1, attention_dropout=0.1
    )
    x = torch.randn(1, 20, 32)
    context.eval()
    assert torch.equal(context(x).last, context(x).last)
    context.train()
    assert not torch.equal(context(x).last, context(x).last)


def test_flops_are_six_times_weights_times_frames() -> None:
    with torch.device("meta"):
        context = WaveContextEncoder(dim=768, depth=12, n_heads=12, ffn_dim=3072, layer_norm_first=False)
    # 94,370,944 (torchaudio's Base) - 4,595,456 (feature encoder + projection)
    assert context.training_flops_per_sample(500) == 6.0 * 89_775_488 * 500
