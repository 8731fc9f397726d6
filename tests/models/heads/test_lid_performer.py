"""Performer (FAVOR+) attention: random features, approximation error, redraw, padding."""

from __future__ import annotations

import torch

from models.heads.performer import (
    PerformerAttention,
    draw_orthogonal_features,
    favor_attention,
)


def exact_softmax_attention(query, key, value):
    scores = query @ key.transpose(-2, -1) / query.shape[-1] ** 0.5
    return torch.softmax(scores, dim=-1) @ value


def test_random_feature_rows_are_orthogonal_within_each_block():
    head_dim = 8
    projection = draw_orthogonal_features(20, head_dim, generator=torch.Generator().manual_seed(0))
    assert projection.shape == (20, head_dim)
    for start in (0, 8, 16):
        block = projection[start : start + head_dim]
        gram = block @ block.T
        off_diagonal = gram - torch.diag(torch.diagonal(gram))
        assert off_diagonal.abs().max().item() < 1e-4 * gram.diagonal().max().item()


def test_performer_error_against_softmax_attention_falls_as_features_grow():
    head_dim, frames, seeds = 16, 64, 6
    feature_counts = (8, 32, 128, 512)
    mean_errors = []
    for num_features in feature_counts:
        errors = []
        for seed in range(seeds):
            generator = torch.Generator().manual_seed(seed)
            query = 0.7 * torch.randn(2, 2, frames, head_dim, generator=generator)
            key = 0.7 * torch.randn(2, 2, frames, head_dim, generator=generator)
            value = torch.randn(2, 2, frames, head_dim, generator=generator)
            projection = draw_orthogonal_features(num_features, head_dim, generator=generator)
            exact = exact_softmax_attention(query, key, value)
            approx = favor_attention(query, key, value, projection)
            errors.append(((approx - exact).norm() / exact.norm()).item())
        mean_errors.append(sum(errors) / seeds)
    print("FAVOR+ relative error by r:", dict(zip(feature_counts, mean_errors)))
    assert all(later < earlier for earlier, later in zip(mean_errors, mean_errors[1:])), mean_errors
    # Monte Carlo error shrinks roughly like r^-1/2: 64x more features should at least halve it.
    assert mean_errors[-1] < 0.5 * mean_errors[0], mean_errors


def test_performer_redraws_features_only_in_training_mode():
    redrawing = PerformerAttention(head_dim=8, num_features=16, redraw_in_training=True)
    query = key = value = torch.randn(1, 1, 10, 8)
    before = redrawing.projection.clone()
    redrawing.train()
    redrawing(query, key, value)
    assert not torch.equal(before, redrawing.projection)

    after_training = redrawing.projection.clone()
    redrawing.eval()
    first, second = redrawing(query, key, value), redrawing(query, key, value)
    assert torch.equal(after_training, redrawing.projection)
    assert torch.equal(first, second)

    fixed = PerformerAttention(head_dim=8, num_features=16, redraw_in_training=False).train()
    fixed_before = fixed.projection.clone()
    fixed(query, key, value)
    assert torch.equal(fixed_before, fixed.projection)


def test_performer_real_frames_unchanged_by_appended_padding():
    generator = torch.Generator().manual_seed(3)
    query, key, value = (torch.randn(1, 2, 12, 8, generator=generator) for _ in range(3))
    projection = draw_orthogonal_features(32, 8, generator=generator)
    unpadded = favor_attention(query, key, value, projection)

    # Padding holds large values so that any leak would show.
    padded = [torch.cat([x, 50 * torch.randn(1, 2, 5, 8, generator=generator)], dim=2) for x in (query, key, value)]
    valid_frames = torch.arange(17)[None, :] < 12
    with_padding = favor_attention(*padded, projection, valid_frames)
    torch.testing.assert_close(with_padding[:, :, :12], unpadded, rtol=1e-5, atol=1e-6)
