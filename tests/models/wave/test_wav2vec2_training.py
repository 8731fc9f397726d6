"""A few dozen AdamW steps on real speech: the contrastive loss falls and the codebook stays in use.

The feature penalty alone falls quickly for any model, and a collapsed codebook drives the
contrastive loss down too (a distractor equal to the positive leaves the softmax), so the test
watches the contrastive term and the code perplexity, not only the total.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import models
from tests.support.training_loop import random_crops


def _train(name: str, speech: np.ndarray, steps: int = 40, lr: float = 3e-3) -> tuple[list[float], float]:
    torch.manual_seed(0)
    model = models.build_model(name)
    batch = random_crops(speech, model.spec.crop_frames, 8, seed=0)
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    contrastive = []
    for _ in range(steps):
        mask = model.draw_mask(batch.shape[0], batch.shape[1], batch.device)
        losses = model.compute_losses(batch, mask)
        optimizer.zero_grad()
        losses.total.backward()
        optimizer.step()
        model.quantizer.advance_step()
        contrastive.append(losses.contrastive.item())
    with torch.no_grad():
        code_perplexity = model.quantizer(model.encoder.features(batch).normalized).code_perplexity.item()
    return contrastive, code_perplexity


@pytest.mark.parametrize(
    "name",
    [
        "wav2vec2-debug",
        "wav2vec2-conformer-debug-relpos",
        "wav2vec2-conformer-debug-rope",
    ],
)
def test_contrastive_loss_falls_on_speech_without_codebook_collapse(
    name: str, speech_log_mel: dict[str, np.ndarray]
) -> None:
    contrastive, code_perplexity = _train(name, speech_log_mel["waveform"])
    assert np.isfinite(contrastive).all()
    first, last = np.mean(contrastive[:5]), np.mean(contrastive[-5:])
    # chance is ln(1 + 10 distractors) = 2.40; over torch seeds 0-3 the last five averaged
    # 0.45-0.58 x the first five (transformer) and 0.63-0.77 x (conformers), perplexity 51-57 of 64
    assert last < 0.85 * first, f"contrastive {first:.3f} -> {last:.3f}"
    assert code_perplexity > 16, f"code perplexity {code_perplexity:.1f} of 64: the codebook collapsed"
