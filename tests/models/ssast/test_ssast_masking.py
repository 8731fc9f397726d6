"""SSAST's masking by count (models/ssast/cluster_masking.py): exact counts, clusters that hold together."""

from __future__ import annotations

import pytest
import torch

import models
from models.ssast.cluster_masking import cluster_mask_ids, mask_from_ids, random_mask_ids


def _isolated_per_clip(ids: torch.Tensor, n_time: int, n_freq: int) -> torch.Tensor:
    """Masked patches without a masked 4-neighbour on the (time, freq) grid, counted per clip."""
    grid = mask_from_ids(ids, n_time * n_freq).reshape(-1, n_time, n_freq)  # time-major tokens
    padded = torch.nn.functional.pad(grid, (1, 1, 1, 1))
    neighbours = padded[:, :-2, 1:-1] + padded[:, 2:, 1:-1] + padded[:, 1:-1, :-2] + padded[:, 1:-1, 2:]
    return ((grid == 1) & (neighbours == 0)).sum(dim=(1, 2))


@pytest.mark.parametrize("n_time,n_freq,n_masked", [(64, 8, 400), (64, 8, 250), (8, 8, 50), (64, 8, 1)])
def test_cluster_masking_masks_exactly_the_count_of_distinct_patches(n_time: int, n_freq: int, n_masked: int) -> None:
    generator = torch.Generator().manual_seed(0)
    ids = cluster_mask_ids(16, n_time, n_freq, n_masked, generator=generator)
    assert ids.shape == (16, n_masked)
    assert all(len(set(row.tolist())) == n_masked for row in ids)
    assert ids.min() >= 0 and ids.max() < n_time * n_freq
    assert (mask_from_ids(ids, n_time * n_freq).sum(dim=1) == n_masked).all()


@pytest.mark.parametrize("n_patches,n_masked", [(512, 400), (512, 250), (64, 50)])
def test_random_masking_masks_exactly_the_count_of_distinct_patches(n_patches: int, n_masked: int) -> None:
    ids = random_mask_ids(16, n_patches, n_masked, generator=torch.Generator().manual_seed(0))
    assert all(len(set(row.tolist())) == n_masked for row in ids)
    assert (mask_from_ids(ids, n_patches).sum(dim=1) == n_masked).all()


def test_clusters_hold_together_where_random_patches_do_not() -> None:
    # 100 of 512 (the count in SSAST's README example): sparse enough that random patches are often
    # alone (each neighbour is masked with probability ~0.2, so ~40% have none).
    n_time, n_freq, n_masked = 64, 8, 100
    clustered = cluster_mask_ids(32, n_time, n_freq, n_masked, generator=torch.Generator().manual_seed(1))
    scattered = random_mask_ids(32, n_time * n_freq, n_masked, generator=torch.Generator().manual_seed(1))
    # only the centre of the last, partly taken square can lack a masked neighbour
    assert _isolated_per_clip(clustered, n_time, n_freq).max() <= 1
    assert _isolated_per_clip(scattered, n_time, n_freq).float().mean() > 0.25 * n_masked


@pytest.mark.parametrize("seed", range(20))
def test_the_first_patches_of_a_clip_come_from_one_square_clipped_at_the_grid_edge(seed: int) -> None:
    # A 3 x 3 square clipped at a corner still holds 4 patches, so 4 masked patches all come from
    # the first square: they fit in a 3 x 3 box (a square wrapped across the time edge, as the
    # reference's flat index does, would not).
    generator = torch.Generator().manual_seed(seed)
    n_time, n_freq = 6, 4
    ids = cluster_mask_ids(8, n_time, n_freq, 4, cluster_sides=(3,), generator=generator)
    time_index, freq_index = ids // n_freq, ids % n_freq
    assert ((time_index.amax(1) - time_index.amin(1)) <= 2).all()
    assert ((freq_index.amax(1) - freq_index.amin(1)) <= 2).all()


def test_masks_follow_the_generator_seed() -> None:
    first = cluster_mask_ids(4, 64, 8, 400, generator=torch.Generator().manual_seed(7))
    again = cluster_mask_ids(4, 64, 8, 400, generator=torch.Generator().manual_seed(7))
    other = cluster_mask_ids(4, 64, 8, 400, generator=torch.Generator().manual_seed(8))
    assert torch.equal(first, again) and not torch.equal(first, other)


@pytest.mark.parametrize("n_masked", [0, 512])
def test_a_count_that_leaves_nothing_to_mask_or_to_see_is_refused(n_masked: int) -> None:
    with pytest.raises(ValueError, match="mask_patches"):
        cluster_mask_ids(1, 64, 8, n_masked)
    with pytest.raises(ValueError, match="mask_patches"):
        models.build_model("ssast-debug-frame", mask_patches=64 if n_masked else 0)


def test_patch_models_mask_clusters_and_frame_models_single_frames() -> None:
    torch.manual_seed(0)
    mel = torch.randn(8, 128, 128)
    patch_model = models.build_model("ssast-debug-patch", mask_patches=12)  # 8 x 8 grid
    frame_model = models.build_model("ssast-debug-frame")
    patch_mask = patch_model(mel).mask
    assert (patch_mask.sum(dim=1) == 12).all()
    ids = patch_mask.nonzero()[:, 1].reshape(8, 12)
    assert _isolated_per_clip(ids, 8, 8).max() <= 1
    assert (frame_model(mel).mask.sum(dim=1) == 50).all()
