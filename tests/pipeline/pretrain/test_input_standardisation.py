"""Pretraining tells a raw-dB-target model how its crops were standardised (the shard set's statistics)."""

from __future__ import annotations

import torch

import models
from pipeline.pretrain.data import give_model_its_input_standardisation
from pipeline.shards.format import read_manifest
from tests.support.pretrain_testdata import make_tiny_shards


def test_the_trainer_gives_the_model_the_shards_statistics(tmp_path):
    shards = make_tiny_shards(tmp_path, preset_name="dasheng")
    model = models.build_model("mae-en256-1")
    assert give_model_its_input_standardisation(model, str(shards))
    manifest = read_manifest(shards)
    torch.testing.assert_close(model.input_bin_mean, torch.tensor(manifest["mean"], dtype=torch.float32))
    assert "input_bin_mean" not in model.state_dict()  # set at every start, never saved
    # The CPU profile's debug model keeps the standardised-crop target its measurements used.
    assert not models.build_model("mae-debug").config.target_raw_db
