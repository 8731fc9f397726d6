from __future__ import annotations

import pytest
import torch

from models.masking import count_kept, gather_tokens, random_masking


@pytest.mark.parametrize(
    "n_patches,mask_ratio,expected_removed",
    [(250, 0.75, 188), (250, 0.8, 200), (50, 0.75, 38), (250, 0.3, 75), (250, 0.95, 238)],
)
def test_exact_number_of_masked_patches(n_patches: int, mask_ratio: float, expected_removed: int) -> None:
    masking = random_masking(5, n_patches, mask_ratio)
    assert masking.mask.sum(dim=1).tolist() == [float(expected_removed)] * 5
    assert masking.n_keep == n_patches - expected_removed


def test_restore_permutation_inverts_the_shuffle() -> None:
    tokens = torch.randn(4, 30, 8)
    masking = random_masking(4, 30, 0.6, generator=torch.Generator().manual_seed(0))
    shuffled = gather_tokens(tokens, masking.ids_shuffle)
    assert torch.equal(gather_tokens(shuffled, masking.ids_restore), tokens)


def test_mask_marks_exactly_the_patches_not_kept() -> None:
    masking = random_masking(3, 40, 0.75)
    kept = torch.zeros(3, 40).scatter(1, masking.ids_keep, 1.0)
    assert torch.equal(masking.mask, 1.0 - kept)  # mask: 1 = removed


def test_masks_differ_between_samples() -> None:
    masking = random_masking(8, 250, 0.8, generator=torch.Generator().manual_seed(1))
    assert len({tuple(row.tolist()) for row in masking.mask}) == 8


def test_mask_ratio_leaving_nothing_visible_is_rejected() -> None:
    with pytest.raises(ValueError, match="no visible patch"):
        count_kept(10, 0.95)
