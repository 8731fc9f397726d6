from __future__ import annotations

import torch

import models
from models.layers.masking import random_masking
from models.mae.cross_decoder import select_feature_maps


def test_decoding_a_subset_equals_the_same_rows_of_decoding_all() -> None:
    torch.manual_seed(0)
    model = models.build_model("audiomae++-debug", decoder="cross").eval()
    patches = model.patchify(torch.randn(2, 200, 80))
    masking = random_masking(2, 250, 0.8)
    with torch.no_grad():
        encoded = model.encoder(patches, masking.ids_keep, keep_feature_maps=True)
        all_rows = model.decoder.predict(encoded, masking.ids_removed)  # (2, 200, 64)
        subset = masking.ids_removed[:, 37:90]
        subset_rows = model.decoder.predict(encoded, subset)
    assert torch.allclose(subset_rows, all_rows[:, 37:90], atol=1e-5)


def test_inter_block_attention_selects_six_of_twelve_maps_including_the_last() -> None:
    assert select_feature_maps(12, 6) == [0, 2, 5, 7, 10, 12]
    assert select_feature_maps(12, 1) == [12]
    model = models.build_model("audiomae++-debug", decoder="cross")
    assert model.decoder.feature_mix.weight.shape == (1, 3)  # 1 decoder block x min(6, depth + 1)


def test_every_decoder_block_mixes_the_encoder_maps_with_its_own_weights() -> None:
    torch.manual_seed(0)
    model = models.build_model("mae-debug", decoder="cross", decoder_depth=2)
    model(torch.randn(2, 200, 64)).loss.backward()
    grad = model.decoder.feature_mix.weight.grad  # (decoder_depth, n_maps)
    assert grad.shape == (2, 3) and torch.all(grad != 0)
