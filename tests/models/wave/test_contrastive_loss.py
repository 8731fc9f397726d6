"""The contrastive task: distractor sampling, cosine logits over kappa, the masked duplicates."""

from __future__ import annotations

import math

import pytest
import torch

from models.wave.contrastive_loss import (
    contrastive_logits,
    contrastive_loss,
    gather_distractors,
    sample_distractor_indices,
)


def test_distractors_are_other_masked_frames_of_the_same_clip_uniformly() -> None:
    indices = sample_distractor_indices(3, 5, 4000, generator=torch.Generator().manual_seed(0))
    assert indices.shape == (3, 5, 4000)
    own = torch.arange(5)[None, :, None]
    assert not (indices == own).any() and indices.min() >= 0 and indices.max() <= 4
    # frame 2's distractors: each of the 4 others with probability 1/4
    counts = torch.bincount(indices[:, 2].flatten(), minlength=5).float() / (3 * 4000)
    torch.testing.assert_close(counts, torch.tensor([0.25, 0.25, 0.0, 0.25, 0.25]), atol=0.02, rtol=0)


def test_gather_takes_rows_of_the_same_clip() -> None:
    targets = torch.arange(2 * 3 * 2, dtype=torch.float32).view(2, 3, 2)
    indices = torch.tensor([[[1, 2], [0, 0], [1, 1]], [[2, 2], [2, 0], [0, 1]]])
    out = gather_distractors(targets, indices)
    assert out.shape == (2, 3, 2, 2)
    assert torch.equal(out[1, 0, 0], targets[1, 2]) and torch.equal(out[0, 2, 1], targets[0, 1])


def test_logits_are_cosine_similarity_over_kappa_positive_first() -> None:
    context = torch.tensor([[[1.0, 0.0]]])
    targets = torch.tensor([[[1.0, 1.0]]])  # cos 45 degrees
    distractors = torch.tensor([[[[0.0, 2.0], [-3.0, 0.0]]]])  # cos 90 and 180 degrees
    logits = contrastive_logits(context, targets, distractors, temperature=0.1)
    torch.testing.assert_close(logits, torch.tensor([[[math.sqrt(0.5) / 0.1, 0.0, -10.0]]]))
    expected = -(math.sqrt(0.5) / 0.1 - math.log(math.exp(math.sqrt(0.5) / 0.1) + 1.0 + math.exp(-10.0)))
    assert contrastive_loss(logits).item() == pytest.approx(expected, rel=1e-5)


def test_a_distractor_equal_to_the_positive_leaves_the_softmax() -> None:
    context = torch.tensor([[[1.0, 0.0]]])
    targets = torch.tensor([[[0.0, 1.0]]])  # cos 0 with the context: logit 0
    distractors = torch.tensor([[[[0.0, 1.0], [1.0, 0.0]]]])  # the first equals the positive
    logits = contrastive_logits(context, targets, distractors, temperature=0.1)
    assert logits[0, 0, 1].item() == float("-inf")
    # loss over {positive 0, distractor 10}: log(1 + e^10)
    assert contrastive_loss(logits).item() == pytest.approx(math.log(1 + math.exp(10.0)), rel=1e-6)


def test_loss_is_the_mean_over_masked_frames() -> None:
    torch.manual_seed(0)
    logits = torch.randn(2, 3, 5)
    per_frame = -torch.log_softmax(logits, dim=-1)[..., 0]
    assert contrastive_loss(logits).item() == pytest.approx(per_frame.mean().item(), rel=1e-6)


def test_one_masked_frame_has_no_distractor() -> None:
    with pytest.raises(ValueError, match="at least 2"):
        sample_distractor_indices(1, 1, 100)
