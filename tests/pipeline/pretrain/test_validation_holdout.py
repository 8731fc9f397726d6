"""The validation holdout grows on small shard sets, so a trial on a few rows still has clips to validate on."""

from __future__ import annotations

import pytest

from pipeline.pretrain.config import PretrainConfig
from pipeline.pretrain.data import validation_holdout_fraction
from pipeline.shards.holdout import held_out


@pytest.mark.parametrize("num_rows, fraction", [(3054, 0.01), (800, 0.01), (80, 0.1), (10, 0.2)])
def test_holdout_fraction_is_the_flag_or_about_eight_clips(num_rows, fraction):
    config = PretrainConfig.from_flat(validation_every_steps=10, validation_fraction=0.01)
    assert validation_holdout_fraction(config, num_rows) == pytest.approx(fraction)


def test_no_holdout_without_validation():
    assert validation_holdout_fraction(PretrainConfig.from_flat(validation_every_steps=0), 80) == 0.0


def test_eighty_clips_hold_some_out():
    clip_ids = [f"speech-{i:02d}-{v}.wav#{s}" for i in range(10) for v in range(3) for s in range(3)][:80]
    config = PretrainConfig.from_flat(validation_every_steps=10, validation_fraction=0.01)
    assert held_out(clip_ids, validation_holdout_fraction(config, len(clip_ids))).sum() >= 3
