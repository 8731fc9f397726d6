"""SSAST sizes: the spec, forward/backward, masking in the input, embed, parameter counts, FLOPs.

Paper sizes are built on the meta device (shapes and counts without memory or arithmetic).
"""

from __future__ import annotations

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

import models
from models.ssast.cluster_masking import mask_from_ids
from pipeline.audio.frontend import get_preset

WIDTHS = {"tiny": 192, "small": 384, "base": 768}
# Our exact counts: encoder (patch embedding, cls + dist tokens, 514-row position table, mask
# embedding, 12 blocks, final norm) + discriminative and generative heads.
OUR_PARAMETERS = {"tiny": 5_660_288, "small": 22_084_352, "base": 87_225_344}
# SSAST paper and the RankMe study's Table IV: Tiny 6M, Small 23M, Base 89M.
PAPER_MILLIONS = {"tiny": 6, "small": 23, "base": 89}


def _meta(name: str, **overrides: object) -> torch.nn.Module:
    with torch.device("meta"):
        return models.build_model(name, **overrides)


def test_all_paper_sizes_and_both_debug_sizes_are_registered() -> None:
    expected = {f"ssast-{size}-{shape}" for size in WIDTHS for shape in ("patch", "frame")}
    expected |= {"ssast-debug-patch", "ssast-debug-frame"}
    assert expected <= set(models.list_models())


@pytest.mark.parametrize("shape,patch,hop_ms", [("patch", (16, 16), 160.0), ("frame", (2, 128), 20.0)])
def test_spec_is_ssasts_input_and_patch_grid(shape: str, patch: tuple[int, int], hop_ms: float) -> None:
    spec = _meta(f"ssast-base-{shape}").spec
    assert (spec.n_mels, spec.frontend_preset, spec.crop_frames) == (128, "ssast", 1024)
    assert (spec.patch_frames, spec.patch_bins, spec.n_patches) == (*patch, 512)
    assert spec.mask_ratio == 400 / 512
    assert spec.frame_hop_ms == hop_ms
    assert spec.embed_dim == 768 * (128 // patch[1])


@pytest.mark.parametrize("name", ["ssast-base-patch", "ssast-debug-frame"])
def test_spec_agrees_with_the_ssast_front_end_preset(name: str) -> None:
    spec = _meta(name).spec
    preset = get_preset(spec.frontend_preset)
    assert spec.n_mels == preset.n_mels == 128
    assert spec.frame_hop_ms == spec.patch_frames * preset.hop_ms
    assert not preset.normalize_per_clip  # dataset statistics, as SSAST normalises


@pytest.mark.parametrize("size", sorted(WIDTHS))
def test_parameter_counts_are_the_papers_less_deits_unused_classifier_heads(size: str) -> None:
    counts = {models.count_parameters(_meta(f"ssast-{size}-{shape}")) for shape in ("patch", "frame")}
    assert counts == {OUR_PARAMETERS[size]}  # patch and frame: equal counts
    count, width = counts.pop(), WIDTHS[size]
    unused_deit_heads = 2 * (1000 * width + 1000)  # timm's head + head_dist, 1000 ImageNet classes
    assert round((count + unused_deit_heads) / 1e6) == PAPER_MILLIONS[size]
    # without them only Tiny rounds to the paper's figure (5.66 -> 6; 22.08 -> 22, 87.23 -> 87)
    assert (round(count / 1e6) == PAPER_MILLIONS[size]) == (size == "tiny")


def test_encoder_carries_two_prefix_tokens_and_one_learnable_table_over_them_and_the_patches() -> None:
    model = _meta("ssast-tiny-patch")
    assert model.encoder.prefix_tokens.shape == (1, 2, 192)
    assert model.encoder.pos_embed.shape == (1, 2 + 512, 192)
    assert model.no_weight_decay_names() <= {name for name, _ in model.named_parameters()}
    assert model.discriminative_head[0].out_features == 192  # hidden width = encoder width


@pytest.mark.parametrize("name", ["ssast-debug-patch", "ssast-debug-frame"])
def test_debug_sizes_run_forward_and_backward_on_cpu(name: str) -> None:
    torch.manual_seed(0)
    model = models.build_model(name)
    out = model(torch.randn(3, model.spec.crop_frames, 128))
    out.loss.backward()
    assert torch.isfinite(out.loss)
    assert out.pred.shape == (3, 64, 256) and out.mask.shape == (3, 64)
    assert model.spec.mask_ratio == 50 / 64  # 400 / 512 scaled to 64 patches
    assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in model.parameters())


@pytest.mark.parametrize("size", ["tiny", "base"])
def test_paper_sizes_run_forward_and_backward(size: str) -> None:
    with torch.device("meta"):
        model = models.build_model(f"ssast-{size}-patch")
        out = model(torch.empty(2, 1024, 128))
        out.loss.backward()
    assert out.pred.shape == (2, 512, 256)
    assert all(p.grad is not None for p in model.parameters())


def test_masked_patches_reach_the_encoder_only_as_the_mask_embedding() -> None:
    torch.manual_seed(0)
    model = models.build_model("ssast-debug-patch").eval()
    patches = torch.randn(2, 64, 256)
    mask = mask_from_ids(torch.tensor([[0, 9, 10], [5, 6, 63]]), 64)
    scrambled = torch.where(mask[..., None].bool(), torch.randn(2, 64, 256), patches)
    with torch.no_grad():
        assert torch.allclose(model.encoder(patches, mask), model.encoder(scrambled, mask))
        assert not torch.allclose(model.encoder(patches), model.encoder(scrambled))


@pytest.mark.parametrize("name,frames,width", [("ssast-debug-patch", 8, 64 * 8), ("ssast-debug-frame", 64, 64)])
def test_embed_returns_one_frame_per_time_patch(name: str, frames: int, width: int) -> None:
    torch.manual_seed(0)
    model = models.build_model(name).eval()
    mel = torch.randn(2, 128, 128)
    with torch.no_grad():
        features = model.embed(mel)
        assert features.shape == (2, frames, width) == (2, frames, model.spec.embed_dim)
        assert torch.equal(features, model.embed(mel))  # no masking: deterministic


def test_embed_encodes_long_inputs_crop_by_crop() -> None:
    torch.manual_seed(0)
    model = models.build_model("ssast-debug-patch").eval()
    mel = torch.randn(1, 128 * 2 + 48, 128)  # two crops and a 3-patch remainder
    with torch.no_grad():
        whole = model.embed(mel)
        pieces = [model.embed(mel[:, :128]), model.embed(mel[:, 128:256]), model.embed(mel[:, 256:])]
    assert whole.shape == (1, 8 + 8 + 3, 512)
    assert torch.allclose(whole, torch.cat(pieces, dim=1))


def test_embed_layer_picks_a_block_output() -> None:
    torch.manual_seed(0)
    last = models.build_model("ssast-debug-frame").eval()
    first = models.build_model("ssast-debug-frame", embed_layer=1).eval()
    first.load_state_dict(last.state_dict())
    mel = torch.randn(1, 128, 128)
    with torch.no_grad():
        patches = last.patchify(mel)
        block_one = last.encoder.blocks[0](
            last.encoder.pos_embed + torch.cat([last.encoder.prefix_tokens, last.encoder.patch_embed(patches)], dim=1)
        )[:, 2:]
        assert torch.allclose(first.embed(mel), block_one, atol=1e-6)
        assert not torch.allclose(last.embed(mel), block_one, atol=1e-3)
    with pytest.raises(ValueError, match="embed_layer"):
        models.build_model("ssast-debug-frame", embed_layer=3)


def test_pipeline_mask_ratio_override_becomes_a_patch_count() -> None:
    assert _meta("ssast-base-patch", mask_ratio=250 / 512).config.mask_patches == 250
    assert _meta("ssast-base-patch", mask_patches=250).spec.mask_ratio == 250 / 512
    with pytest.raises(ValueError, match="give only one"):
        _meta("ssast-base-patch", mask_ratio=0.5, mask_patches=250)


def test_training_flops_count_every_token_in_the_encoder_and_masked_ones_in_the_heads() -> None:
    model = _meta("ssast-base-patch")
    encoder = models.count_parameters(model.encoder.blocks) + models.count_parameters(model.encoder.norm)
    embed = models.count_parameters(model.encoder.patch_embed)
    heads = models.count_parameters(model.discriminative_head) * 2
    expected = 6 * (embed * 512 + encoder * (512 + 2) + heads * 400)
    assert model.training_flops_per_sample() == pytest.approx(expected)
    fewer_masked = _meta("ssast-base-patch", mask_patches=250).training_flops_per_sample()
    assert expected - fewer_masked == pytest.approx(6 * heads * 150)
    # about 6 N x 514 tokens; Small and Tiny scale with their parameters
    assert expected == pytest.approx(6 * OUR_PARAMETERS["base"] * 514, rel=0.01)
    assert _meta("ssast-tiny-frame").training_flops_per_sample() == pytest.approx(
        expected * OUR_PARAMETERS["tiny"] / OUR_PARAMETERS["base"], rel=0.02
    )


@pytest.mark.parametrize("name", ["ssast-debug-patch", "ssast-debug-frame"])
def test_training_flops_match_counted_weight_matmuls(name: str) -> None:
    model = models.build_model(name)
    batch = 4
    counter = FlopCounterMode(display=False)
    with counter:
        model(torch.randn(batch, model.spec.crop_frames, 128)).loss.backward()
    # weight matmuls only (mm/addmm): the InfoNCE scores are a bmm, left out of 6N as attention
    # scores are; the patch embedding's input gradient is never computed, so slightly under 6N
    counts = counter.get_flop_counts()["Global"]
    counted = sum(flops for op, flops in counts.items() if str(op).split(".")[-1] in ("mm", "addmm"))
    assert 0.9 < counted / batch / model.training_flops_per_sample() <= 1.0
