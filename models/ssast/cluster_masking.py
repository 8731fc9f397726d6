"""SSAST's masking by count: an exact number of masked patches per clip, in clusters or at random.

SSAST (Gong et al., AAAI 2022, and its reference code `ASTModel.gen_maskid_patch`) masks
patch-based models in clusters: pick a random patch, mask the square of side C around it, repeat
until enough patches are masked; C is drawn per clip from {3, 4, 5} (`randrange(3) + 3`, the
reference's cluster factor 3). Frame-based models mask single frames at random
(`gen_maskid_frame`: "using cluster for frame masking hurts the performance").

Our cluster masking works on the (time, frequency) patch grid, vectorized (no Python loop per
clip, so it runs on the training device and on the meta device):
- squares are clipped at the grid's edges; the reference instead steps through a flat
  frequency-major index and wraps a square that crosses the time edge into the next frequency
  row, and never masks patch 0 (`mask_cand > 0`). Both are index artefacts, not the method.
- exactly `n_masked` patches: squares are taken in draw order until the count is reached, and the
  last square contributes only its cells nearest its centre (Manhattan distance). The reference
  draws until it has more than `mask_size` and keeps the first `mask_size` of a Python set, i.e.
  drops the highest flat indices, which can cut any square.
Every masked patch except at most the centre of that last, partial square therefore has a masked
4-neighbour (the step towards its square's centre).

Returned ids are (batch, n_masked) token indices in the time-major order of models/interface.py.
"""

from __future__ import annotations

import torch

# SSAST's gen_maskid_patch: cur_clus = randrange(cluster) + 3 with cluster = 3 -> sides 3, 4, 5.
SSAST_CLUSTER_SIDES = (3, 4, 5)


def check_mask_count(n_patches: int, n_masked: int) -> None:
    if not 0 < n_masked < n_patches:
        raise ValueError(
            f"mask_patches={n_masked} must be between 1 and {n_patches - 1} (the crop has "
            f"{n_patches} patches and at least one stays visible)"
        )


def random_mask_ids(
    batch: int,
    n_patches: int,
    n_masked: int,
    *,
    device: torch.device | str = "cpu",
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """(batch, n_masked) distinct patch indices per clip, uniformly at random (frame-based SSAST)."""
    check_mask_count(n_patches, n_masked)
    noise = torch.rand(batch, n_patches, device=device, generator=generator)
    return torch.argsort(noise, dim=1)[:, :n_masked]


def cluster_mask_ids(
    batch: int,
    n_time: int,
    n_freq: int,
    n_masked: int,
    *,
    cluster_sides: tuple[int, ...] = SSAST_CLUSTER_SIDES,
    device: torch.device | str = "cpu",
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """(batch, n_masked) distinct patch indices per clip, grown as squares around random centres.

    One square side per clip, drawn from `cluster_sides`. `n_masked` squares are drawn per clip:
    each covers at least one patch (its centre), so together they nearly always cover far more
    than `n_masked`; should they ever cover fewer, the rest are random uncovered patches.
    """
    n_patches = n_time * n_freq
    check_mask_count(n_patches, n_masked)
    if min(cluster_sides) < 1:
        raise ValueError(f"cluster_sides={cluster_sides}: every square side must be at least 1")
    n_squares = n_masked
    sides = torch.tensor(cluster_sides, device=device, dtype=torch.int32)
    side_pick = torch.randint(len(cluster_sides), (batch, 1), device=device, generator=generator)
    side = sides[side_pick]  # (batch, 1)
    before = (side - 1) // 2  # cells before the centre along each axis; side - 1 - before after
    # int32 halves the (batch, squares, patches) intermediates: 24 x 400 x 512 at Base's batch
    draw = {"device": device, "generator": generator, "dtype": torch.int32}
    centre_time = torch.randint(n_time, (batch, n_squares), **draw)
    centre_freq = torch.randint(n_freq, (batch, n_squares), **draw)

    token = torch.arange(n_patches, device=device, dtype=torch.int32)
    time_offset = (token // n_freq)[None, None, :] - centre_time[..., None]  # (batch, squares, n)
    freq_offset = (token % n_freq)[None, None, :] - centre_freq[..., None]
    low, high = -before[..., None], (side - 1 - before)[..., None]  # (batch, 1, 1)
    inside = (time_offset >= low) & (time_offset <= high) & (freq_offset >= low) & (freq_offset <= high)
    # Priority of a patch: the first square that covers it, then its distance to that square's
    # centre. Distances stay below n_patches, so square index * n_patches orders squares first.
    distance = time_offset.abs() + freq_offset.abs()
    square_index = torch.arange(n_squares, device=device, dtype=torch.int32)[None, :, None]
    priority = torch.where(inside, square_index * n_patches + distance, n_squares * n_patches)
    # float64 keeps priorities exact past float32's 2^24 (a (batch, n_patches) tensor: cheap)
    first = priority.min(dim=1).values.double()  # (batch, n_patches)
    # uncovered patches tie at the largest priority; noise below 1 orders them at random
    noise = torch.rand(batch, n_patches, device=device, generator=generator, dtype=torch.float64)
    first = first + noise * (first == n_squares * n_patches)
    return torch.argsort(first, dim=1)[:, :n_masked]


def mask_from_ids(ids: torch.Tensor, n_patches: int) -> torch.Tensor:
    """ids (batch, n_masked) -> mask (batch, n_patches) float, 1 = masked."""
    mask = torch.zeros(ids.shape[0], n_patches, device=ids.device)
    return mask.scatter(1, ids, 1.0)
