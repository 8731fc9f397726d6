"""Span masking by fairseq's compute_mask_indices rule (wav2vec 2.0 / HuBERT)."""

from __future__ import annotations

import pytest
import torch

from models.wave.span_masking import count_span_starts, expected_masked_fraction, span_mask


def _runs(row: torch.Tensor) -> list[int]:
    """Lengths of the runs of True in a 1-D bool tensor."""
    lengths, current = [], 0
    for value in row.tolist() + [False]:
        if value:
            current += 1
        elif current:
            lengths.append(current)
            current = 0
    return lengths


@pytest.mark.parametrize(
    "n_frames,p,uniform,expected",
    [
        (500, 0.065, 0.0, 32),
        (500, 0.065, 0.49, 32),
        (500, 0.065, 0.5, 33),  # 32.5 + u, floored
        (500, 0.08, 0.0, 40),
        (100, 0.065, 0.7, 7),
        (20, 0.065, 0.9, 2),  # 1.3 + 0.9 -> 2; min 2
        (10, 0.065, 0.0, 2),
    ],
)
def test_span_count_is_int_of_p_times_frames_plus_uniform(n_frames, p, uniform, expected) -> None:
    assert count_span_starts(n_frames, p, uniform) == expected


def test_spans_are_at_least_ten_frames_and_start_before_t_minus_m() -> None:
    mask = span_mask(
        200,
        500,
        start_probability=0.065,
        span_frames=10,
        same_count_per_row=False,
        generator=torch.Generator().manual_seed(0),
    )
    for row in mask:
        assert all(length >= 10 for length in _runs(row))  # unions of 10-frame spans
    # starts are drawn from [0, T - M) = [0, 490): the last span ends at frame 498 at the latest
    assert not mask[:, 499].any()
    assert mask[:, 498].any() and mask[:, 0].any()


def test_without_trimming_each_clip_has_n_starts_of_ten_frames() -> None:
    # isolated spans: 5 starts in 500 frames rarely overlap; total masked = 10 x starts - overlaps
    generator = torch.Generator().manual_seed(3)
    mask = span_mask(50, 500, start_probability=0.01, span_frames=10, same_count_per_row=False, generator=generator)
    counts = mask.sum(dim=1)
    assert counts.max().item() <= 50  # int(0.01 x 500 + u) = 5 spans for every u
    assert (counts == 50).float().mean() > 0.5  # most clips: 5 disjoint spans


def test_same_count_per_row_trims_every_clip_to_the_fewest() -> None:
    mask = span_mask(8, 500, start_probability=0.065, span_frames=10, generator=torch.Generator().manual_seed(1))
    counts = mask.sum(dim=1).tolist()
    assert len(set(counts)) == 1
    assert 200 <= counts[0] <= 330  # 32-33 spans of 10 with overlaps


def test_masked_fraction_matches_overlapping_span_coverage_on_long_sequences() -> None:
    # coverage 1 - (1 - n / (T - M))^M with n = p T: 0.65 nominal, ~0.48 with overlaps
    mask = span_mask(
        64,
        5000,
        start_probability=0.065,
        span_frames=10,
        same_count_per_row=False,
        generator=torch.Generator().manual_seed(2),
    )
    expected = expected_masked_fraction(5000, 0.065, 10)
    assert expected == pytest.approx(1 - (1 - 325 / 4990) ** 10)
    assert mask.float().mean().item() == pytest.approx(expected, abs=0.01)
    assert expected == pytest.approx(1 - (1 - 0.065) ** 10, abs=0.01)  # the brief's estimate


def test_seeded_generator_reproduces_the_mask() -> None:
    first = span_mask(4, 100, start_probability=0.065, span_frames=10, generator=torch.Generator().manual_seed(7))
    second = span_mask(4, 100, start_probability=0.065, span_frames=10, generator=torch.Generator().manual_seed(7))
    assert torch.equal(first, second)
    assert first.dtype == torch.bool and first.shape == (4, 100)


def test_too_short_clip_is_rejected_with_the_frames_needed() -> None:
    with pytest.raises(ValueError, match="at least 5 frames"):
        span_mask(1, 4, start_probability=0.065, span_frames=10)


def test_bad_probability_is_rejected() -> None:
    with pytest.raises(ValueError, match="start_probability=6.5"):
        span_mask(1, 100, start_probability=0.65 * 10, span_frames=10)
