"""hubert-debug learns: on real speech with a real fitted MFCC codebook, the masked-frame
cross-entropy falls within a few dozen AdamW steps."""

from __future__ import annotations

import torch

import models
from tests.support.hubert_fixtures import speech_codebook_and_crops
from tests.support.training_loop import assert_loss_fell, train_losses


def test_masked_prediction_loss_falls_on_speech(tmp_path):
    codebook, crops = speech_codebook_and_crops(tmp_path)
    torch.manual_seed(0)
    # No feature penalty: it alone would fall (by shrinking the conv features) without any learning
    # of the targets; what must fall here is the cross-entropy.
    model = models.build_model("hubert-debug", codebook=str(codebook), feature_penalty_weight=0.0)
    losses = train_losses(model, crops, steps=40, lr=2e-3)
    assert_loss_fell(losses, to_at_most=0.8)
