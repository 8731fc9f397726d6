"""hubert-debug on CPU: forward/backward, the masked-only objective against a hand computation, masks,
embeddings, the codebook it carries, and the errors a user can cause."""

from __future__ import annotations

import math

import pytest
import torch

import models
from models.wave.hubert import MissingCodebookError
from models.wave.hubert_codebook import CodebookError
from tests.support.hubert_fixtures import speech_codebook_and_crops


@pytest.fixture(scope="module")
def speech(tmp_path_factory):
    return speech_codebook_and_crops(tmp_path_factory.mktemp("hubert-speech"))


@pytest.fixture()
def model(speech):
    torch.manual_seed(0)
    return models.build_model("hubert-debug", codebook=str(speech[0]))


def test_without_a_codebook_forward_says_how_to_make_one_and_embed_works():
    model = models.build_model("hubert-debug")
    with pytest.raises(MissingCodebookError, match="python -m pipeline.targets --shards"):
        model(torch.randn(2, 100, 320))
    assert model.embed(torch.randn(2, 100, 320)).shape == (2, 100, 64)


def test_a_missing_codebook_folder_is_a_clear_error(tmp_path):
    with pytest.raises(
        CodebookError, match=f"{tmp_path / 'none'} holds no codebook; make one with: python -m pipeline"
    ):
        models.build_model("hubert-debug", codebook=str(tmp_path / "none"))


def test_forward_backward_reaches_every_trainable_parameter(model, speech):
    out = model(speech[1])
    assert out.loss.ndim == 0 and torch.isfinite(out.loss)
    out.loss.backward()
    missing = [name for name, p in model.named_parameters() if p.grad is None or not p.grad.abs().sum() > 0]
    assert missing == []
    assert out.pred.shape == (6, 100, 16)  # cluster logits per frame
    assert torch.equal(out.scored, out.mask)
    assert (out.pred[out.mask == 0] == 0).all() and (out.pred[out.mask == 1] != 0).any()


def test_masks_are_spans_with_the_same_count_per_crop(model, speech):
    torch.manual_seed(1)
    mask = model(speech[1]).mask
    counts = mask.sum(dim=1)
    assert mask.shape == (6, 100) and (counts == counts[0]).all()
    # 8% of 100 frames start 10-frame spans (at least 2): between 10 and 80 frames are masked
    assert 10 <= counts[0] <= 80


def test_objective_is_cross_entropy_of_cosine_logits_on_masked_frames_only(model):
    torch.manual_seed(2)
    context, conv = torch.randn(2, 100, 64), torch.randn(2, 100, 32)
    labels = torch.randint(0, 16, (2, 100))
    mask = torch.zeros(2, 100, dtype=torch.bool)
    mask[0, 10:20], mask[1, 50:60] = True, True
    loss, _ = model.forward_loss(context, labels, mask, conv)
    by_hand = []
    for b, t in mask.nonzero().tolist():
        projected = model.final_proj.weight @ context[b, t] + model.final_proj.bias
        logits = torch.stack(
            [torch.dot(projected, e) / (projected.norm() * e.norm()) / 0.1 for e in model.label_embeddings]
        )
        by_hand.append(torch.logsumexp(logits, 0) - logits[labels[b, t]])
    penalty = 10.0 * (conv**2).mean()  # fairseq's features_pen with loss weight 10
    torch.testing.assert_close(loss, torch.stack(by_hand).mean() + penalty, rtol=1e-5, atol=1e-5)
    other_labels = labels.clone()
    other_labels[~mask] = (labels[~mask] + 1) % 16  # unmasked frames' labels do not count
    torch.testing.assert_close(model.forward_loss(context, other_labels, mask, conv)[0], loss)


def test_forward_is_the_pieces_in_order(model, speech):
    batch = speech[1][:2]
    torch.manual_seed(3)
    out = model(batch)
    torch.manual_seed(3)
    mask = model.draw_mask(2, batch.device)
    features, context = model.encoder(batch, mask, model.mask_embedding)
    expected, _ = model.forward_loss(context.last, model.label_frames(batch), mask, features.conv)
    assert torch.equal(out.mask.bool(), mask)
    torch.testing.assert_close(out.loss, expected)


def test_masked_frames_enter_the_transformer_as_the_mask_embedding(model, speech):
    batch = speech[1][:1]
    mask = torch.zeros(1, 100, dtype=torch.bool)
    mask[0, 30:40] = True
    features, _ = model.encoder(batch, mask, model.mask_embedding)
    seen = []
    handle = model.encoder.context.register_forward_pre_hook(lambda module, args: seen.append(args[0]))
    model.encoder(batch, mask, model.mask_embedding)
    handle.remove()
    assert torch.equal(seen[0][0, 30:40], model.mask_embedding.expand(10, -1))
    assert torch.equal(seen[0][0, :30], features.projected[0, :30])


@pytest.mark.parametrize("frames", [100, 137])
def test_embed_returns_one_frame_per_stored_frame(model, frames):
    assert model.embed(torch.randn(2, frames, 320)).shape == (2, frames, 64)


def test_embed_layer_picks_a_block_output(speech):
    batch = speech[1][:2]
    torch.manual_seed(0)
    last = models.build_model("hubert-debug", codebook=str(speech[0])).eval()
    torch.manual_seed(0)
    first = models.build_model("hubert-debug", codebook=str(speech[0]), embed_layer=1).eval()
    _, context = last.encoder(batch)
    torch.testing.assert_close(first.embed(batch), context.layers[0])
    torch.testing.assert_close(last.embed(batch), context.last)
    with pytest.raises(ValueError, match=r"embed_layer=3: use None \(the last layer\) or a block number in \[1, 2\]"):
        models.build_model("hubert-debug", embed_layer=3)


def test_the_codebook_travels_in_the_state_dict_and_is_not_trained(model, speech):
    state = model.state_dict()
    assert state["labeller.centroids"].shape == (16, 39)
    assert "labeller.centroids" not in dict(model.named_parameters())
    before = state["labeller.centroids"].clone()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    model(speech[1]).loss.backward()
    optimizer.step()
    assert torch.equal(model.labeller.centroids, before)


def test_a_crop_of_another_length_is_refused(model):
    with pytest.raises(ValueError, match="crops of 100 frames, got 120: build it with crop_frames=120"):
        model(torch.randn(1, 120, 320))


def test_weight_decay_exemptions_are_the_mask_embedding_and_weight_norm_scale(model):
    names = model.no_weight_decay_names()
    assert names == {"mask_embedding", "encoder.context.position_conv.conv.parametrizations.weight.original0"}
    assert names <= dict(model.named_parameters()).keys()


def test_initial_loss_is_near_log_k_for_uniform_predictions(speech):
    torch.manual_seed(0)
    model = models.build_model("hubert-debug", codebook=str(speech[0]), feature_penalty_weight=0.0)
    # cosine logits / 0.1 lie in [-10, 10]: at initialisation the loss sits near (not at) log 16
    assert abs(model(speech[1]).loss.item() - math.log(16)) < 1.5


@pytest.mark.parametrize("name,crop_frames", [("hubert-base", 500), ("hubert-xlarge", 500), ("hubert-debug", 100)])
def test_spec_is_the_waveform_contract(name, crop_frames):
    with torch.device("meta"):
        spec = models.build_model(name).spec
    assert (spec.frontend_preset, spec.n_mels, spec.patch_frames, spec.patch_bins) == ("waveform", 320, 1, 320)
    assert (spec.crop_frames, spec.frame_hop_ms, spec.n_patches) == (crop_frames, 20.0, crop_frames)


@pytest.mark.parametrize(
    "overrides,message",
    [
        ({"extractor_mode": "batch_norm"}, "extractor_mode='batch_norm', use one of"),
        ({"encoder_heads": 3}, "encoder_dim=64 must divide into encoder_heads=3"),
        ({"frontend_preset": "dasheng"}, "HuBERT reads the 'waveform' preset"),
        ({"crop_frames": 20}, "crop_frames=20 leaves no room for 10-frame mask spans: use at least 21"),
        ({"feature_gradient_scale": 0.0}, r"feature_gradient_scale=0.0 must be in \(0, 1\]"),
    ],
)
def test_bad_overrides_name_the_field(overrides, message):
    with pytest.raises(ValueError, match=message):
        models.build_model("hubert-debug", **overrides)


def test_the_pipelines_mask_ratio_and_crop_overrides_round_trip():
    """The pretraining config hands `mask_ratio=spec.mask_ratio` and `crop_frames` back to the builder."""
    with torch.device("meta"):
        own = models.build_model("hubert-base")
        again = models.build_model("hubert-base", mask_ratio=own.spec.mask_ratio, crop_frames=own.spec.crop_frames)
        more = models.build_model("hubert-base", mask_ratio=0.7)
    assert again.config.span_start_probability == pytest.approx(0.08)
    assert again.spec.mask_ratio == pytest.approx(own.spec.mask_ratio)
    assert more.spec.mask_ratio == pytest.approx(0.7) and more.config.span_start_probability > 0.08


def test_mask_ratio_override_moves_the_masked_share(speech):
    torch.manual_seed(0)
    counts = {}
    for ratio in (0.3, 0.7):
        model = models.build_model("hubert-debug", codebook=str(speech[0]), mask_ratio=ratio)
        counts[ratio] = torch.stack([model.draw_mask(1, torch.device("cpu")).float().mean() for _ in range(200)]).mean()
        assert abs(counts[ratio] - ratio) < 0.05  # one crop per draw: no same-count trimming
