"""AxLSTM behaviour on the debug size: in-place masking, the loss, embeddings, decoders."""

from __future__ import annotations

import pytest
import torch

import models
from pipeline.audio.frontend import get_preset


def _mel(batch: int = 2, seed: int = 0) -> torch.Tensor:
    return torch.randn(batch, 200, 80, generator=torch.Generator().manual_seed(seed))


def _forward_with_seed(model: torch.nn.Module, mel: torch.Tensor, seed: int = 3):
    torch.manual_seed(seed)  # the same seed draws the same mask
    return model(mel)


def test_half_of_the_patches_are_masked_in_place() -> None:
    model = models.build_model("axlstm-debug")
    out = model(_mel(batch=3))
    assert out.mask.shape == (3, 250)
    assert out.mask.sum(dim=1).tolist() == [125.0] * 3
    assert out.pred.shape == (3, 250, 64)  # every position is reconstructed


def test_encoder_never_sees_the_content_of_masked_patches() -> None:
    model = models.build_model("axlstm-debug").eval()
    mel = _mel()
    first = _forward_with_seed(model, mel)
    mask_frames = first.mask.view(2, 50, 5).repeat_interleave(4, 1).repeat_interleave(16, 2)
    scrambled = torch.where(mask_frames.bool(), torch.randn_like(mel) * 10, mel)
    again = _forward_with_seed(model, scrambled)
    assert torch.equal(again.mask, first.mask)
    torch.testing.assert_close(again.pred, first.pred)


def _per_patch_error(model: torch.nn.Module, mel: torch.Tensor, pred: torch.Tensor) -> torch.Tensor:
    return ((pred - model.patchify(mel)) ** 2).mean(-1)  # (batch, n_patches)


def test_loss_averages_masked_patches_by_default() -> None:
    model = models.build_model("axlstm-debug")
    mel = _mel()
    out = model(mel)
    error = _per_patch_error(model, mel, out.pred)
    assert torch.equal(out.scored, out.mask)
    torch.testing.assert_close(out.loss, error[out.mask.bool()].mean())
    assert not torch.isclose(out.loss, error.mean())


def test_authors_all_patch_loss_is_an_option() -> None:
    model = models.build_model("axlstm-debug", loss_on_all_patches=True)
    mel = _mel()
    out = model(mel)
    assert out.scored.sum().item() == 2 * 250
    torch.testing.assert_close(out.loss, _per_patch_error(model, mel, out.pred).mean())


def test_embed_frame_concatenates_the_five_frequency_patches_of_one_time_step() -> None:
    model = models.build_model("axlstm-debug").eval()
    mel = _mel()
    with torch.no_grad():
        frames = model.embed(mel)
        tokens = model.encoder(model.patchify(mel)).patch_tokens  # (2, 250, 48), time-major
    assert frames.shape == (2, 50, model.spec.embed_dim) == (2, 50, 5 * 48)
    torch.testing.assert_close(frames[:, 7], tokens[:, 35:40].flatten(1))
    assert model.spec.frame_hop_ms == 40.0


def test_parallel_and_chunkwise_models_give_the_same_embeddings() -> None:
    torch.manual_seed(0)
    parallel = models.build_model("axlstm-debug", mlstm_form="parallel").eval()
    chunkwise = models.build_model("axlstm-debug", mlstm_form="chunkwise", chunk_size=32).eval()
    chunkwise.load_state_dict(parallel.state_dict())
    mel = _mel()
    with torch.no_grad():
        torch.testing.assert_close(chunkwise.embed(mel), parallel.embed(mel), atol=1e-4, rtol=1e-4)


def test_cross_decoder_scores_only_the_predicted_subset() -> None:
    model = models.build_model("axlstm-debug", decoder="cross", prediction_ratio=0.2)
    out = model(_mel())
    assert out.scored.sum(dim=1).tolist() == [50.0, 50.0]  # 0.2 * 250
    assert bool((out.scored <= out.mask).all())  # predicted patches are masked ones
    assert model.lr_scale == pytest.approx(0.4)


def test_no_weight_decay_names_are_the_tokens() -> None:
    model = models.build_model("axlstm-debug")
    assert model.no_weight_decay_names() == {"encoder.cls_token", "encoder.mask_token"}


@pytest.mark.parametrize(
    "overrides,message",
    [
        ({"mlstm_form": "recurrent"}, "mlstm_form"),
        ({"prediction_ratio": 0.3}, "prediction_ratio needs decoder='cross'"),
        ({"decoder": "cross", "prediction_ratio": 0.6}, "prediction_ratio=0.6"),
        ({"expansion_factor": 0}, "expansion_factor"),
        ({"decoder": "mae"}, "decoder='mae'"),
    ],
)
def test_bad_overrides_name_the_field(overrides: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        models.build_model("axlstm-debug", **overrides)


def test_wrong_mel_bins_names_the_front_end() -> None:
    model = models.build_model("axlstm-debug")
    with pytest.raises(ValueError, match="audiomae"):
        model(torch.randn(1, 200, 64))


def test_spec_agrees_with_the_audiomae_front_end() -> None:
    model = models.build_model("axlstm-debug")
    preset = get_preset(model.spec.frontend_preset)
    assert model.spec.frontend_preset == "audiomae" and model.spec.n_mels == preset.n_mels == 80
    assert model.spec.input_shape == (200, 80) and model.spec.n_patches == 250
    assert model.spec.frame_hop_ms == model.spec.patch_frames * preset.hop_ms


def test_unpatchify_restores_the_mel() -> None:
    model = models.build_model("axlstm-debug")
    mel = _mel()
    assert torch.equal(model.unpatchify(model.patchify(mel)), mel)
