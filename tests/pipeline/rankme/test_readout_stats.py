"""The readout's calibration crops (a prefix of the RankMe pool's selection) and the readout they give,
for both architectures with running statistics: the study MAE (input BatchNorm over mel bins) and the
wav2vec 2.0 conformer (a BatchNorm in every convolution module)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import models
from pipeline.rankme.model_rankme import measure_pool_rankme
from pipeline.rankme.pool import iter_pool_crops, select_pool
from pipeline.rankme.readout_stats import (
    CALIBRATION_CROPS,
    calibrate_for_readout,
    calibrated_readout,
    calibration_pool,
)
from tests.pipeline.rankme.test_rankme_pool import write_shards
from tests.support.speech_waveform_shards import write_speech_waveform_shards


@pytest.fixture(scope="module")
def mel_shards(tmp_path_factory):
    return write_shards(tmp_path_factory.mktemp("mel") / "shards", rows=40, frames=400, n_mels=64)


def test_the_calibration_crops_are_the_pools_first_crops(mel_shards):
    small = calibration_pool(str(mel_shards), crop_frames=96)
    everything = select_pool(str(mel_shards), crop_frames=96)
    assert small.n == everything.n == 160 < CALIBRATION_CROPS  # fewer crops than that: all of them
    assert small == everything
    prefix = select_pool(str(mel_shards), crop_frames=96, n=50)
    k = len(prefix.rows)  # a smaller pool is a prefix: the same clips in the same order
    assert prefix.rows[:-1] == everything.rows[: k - 1]
    assert prefix.rows[-1][0] == everything.rows[k - 1][0] and prefix.rows[-1][1] <= everything.rows[k - 1][1]


def _histories(name: str, **overrides):
    """Two copies of one initialisation whose running statistics have different pasts."""
    torch.manual_seed(0)
    first = models.build_model(name, **overrides)
    second = models.build_model(name, **overrides)
    second.load_state_dict(first.state_dict())
    return first, second


def test_the_study_maes_readout_no_longer_depends_on_its_past(mel_shards):
    first, second = _histories("mae-debug", crop_frames=96)
    second.encoder.input_norm.running_mean.fill_(2.0)  # as if training had moved it
    second.encoder.input_norm.running_var.fill_(3.0)
    pool = calibration_pool(str(mel_shards), crop_frames=96)
    before = measure_pool_rankme(first, pool, device="cpu").value, measure_pool_rankme(second, pool, device="cpu").value
    assert abs(before[0] - before[1]) > 1e-3
    with calibrated_readout(first, pool, device="cpu"), calibrated_readout(second, pool, device="cpu"):
        after = (
            measure_pool_rankme(first, pool, device="cpu").value,
            measure_pool_rankme(second, pool, device="cpu").value,
        )
        crops = torch.from_numpy(next(iter_pool_crops(pool, batch_crops=8)))
        torch.testing.assert_close(first.embed(crops), second.embed(crops), rtol=0, atol=0)
    assert after[0] == after[1]
    # the input BatchNorm sees the normalised crops themselves: its mean is theirs, bin by bin (each
    # batch of the pool's reader counts once)
    batch_means = [batch.mean(axis=(0, 1)) for batch in iter_pool_crops(pool)]  # (crops, frames, mels) each
    assert len(batch_means) == 3
    calibrate_for_readout(first, pool, device="cpu")
    np.testing.assert_allclose(first.encoder.input_norm.running_mean.numpy(), np.mean(batch_means, axis=0), atol=1e-6)
    # and after the block the statistics training tracks are back
    assert torch.all(second.encoder.input_norm.running_mean == 2.0)


def test_the_conformers_batchnorms_are_reestimated_on_the_waveform_pool(tmp_path):
    shards = write_speech_waveform_shards(tmp_path)
    first, second = _histories("wav2vec2-conformer-debug-rope")
    pool = calibration_pool(str(shards), crop_frames=first.spec.crop_frames)
    norms = [m for m in second.modules() if isinstance(m, torch.nn.BatchNorm1d)]
    assert norms
    for norm in norms:
        norm.running_mean.uniform_(-1, 1)
    for model in (first, second):
        assert calibrate_for_readout(model, pool, device="cpu") >= 1
    for a, b in zip(first.modules(), second.modules(), strict=True):
        if isinstance(a, torch.nn.BatchNorm1d):
            torch.testing.assert_close(a.running_mean, b.running_mean, rtol=0, atol=0)
            assert not torch.all(a.running_mean == 0)
