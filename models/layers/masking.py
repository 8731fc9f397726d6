"""Random masking of patch tokens, MAE style: shuffle by argsort of noise, keep the first.

mask: 1 = removed (models/interface.py). `ids_shuffle[:, :n_keep]` are the visible patches in the
order the encoder sees them; `ids_shuffle[:, n_keep:]` are the removed ones in random order (the
CrossMAE decoder predicts a prefix of them). `ids_restore` is the inverse permutation: gathering a
shuffled sequence with it puts every token back at its patch position.

Grouped masking (Dasheng's `random_masking_group`, `group_masking: True` = groups of 2): one noise
value per group of consecutive tokens, so a group is kept or removed as a whole; within a group
ids_shuffle lists its tokens in patch order. The kept count is the ungrouped one (Dasheng keeps
int(N (1 - ratio)) tokens whatever the group size), so when it is not a multiple of the group
size exactly one group straddles the boundary: its first tokens are kept and the rest removed.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True, kw_only=True)
class Masking:
    ids_shuffle: torch.Tensor  # (batch, n_patches) long: patch index at each shuffled position
    ids_restore: torch.Tensor  # (batch, n_patches) long: shuffled position of each patch
    mask: torch.Tensor  # (batch, n_patches) float, 1 = removed
    n_keep: int  # visible patches per sample

    @property
    def ids_keep(self) -> torch.Tensor:
        return self.ids_shuffle[:, : self.n_keep]

    @property
    def ids_removed(self) -> torch.Tensor:
        return self.ids_shuffle[:, self.n_keep :]


def check_mask_ratio(mask_ratio: object, *, where: str) -> float:
    """The one range check of a mask ratio, for every model family, the run config and the study grids.

    A fraction of patches (or frames) in (0, 1): 0 leaves nothing to predict (the masked loss has no
    term) and 1 leaves the encoder nothing to see. `where` names the setting (`--mask-ratio`,
    `mae-debug: mask_ratio`) so the message says what to change."""
    if isinstance(mask_ratio, bool) or not isinstance(mask_ratio, int | float) or not 0.0 < mask_ratio < 1.0:
        raise ValueError(f"{where} must be a fraction of the patches in (0, 1), got {mask_ratio!r}")
    return float(mask_ratio)


# The tolerance of the pipeline's own rounding (see `count_kept`); 0 is the reference codes'.
KEPT_COUNT_TOLERANCE = 1e-6


def count_kept(n_patches: int, mask_ratio: float, *, tolerance: float = KEPT_COUNT_TOLERANCE) -> int:
    """Visible patches for a mask ratio: floor(N * (1 - ratio) + tolerance).

    MAE's and Dasheng's code compute `int(L * (1 - mask_ratio))` with no tolerance (Dasheng's
    dasheng/train/models.py L378 random_masking and L344 random_masking_group), so float error drops a patch
    there: 250 * (1 - 0.8) = 49.999... keeps 49, and 0.9 keeps 24. `tolerance=0` reproduces that (the
    study MAE sizes); the default 1e-6 keeps 50 and 25, what the CPU profile's models were measured with.
    """
    # The setting itself is checked where it is set (check_mask_ratio); 0 here is a count with nothing removed.
    n_keep = int(n_patches * (1.0 - mask_ratio) + tolerance)
    if n_keep < 1 or mask_ratio < 0.0:
        raise ValueError(f"mask_ratio={mask_ratio} leaves no visible patch of {n_patches}")
    return n_keep


def random_masking(
    batch: int,
    n_patches: int,
    mask_ratio: float,
    *,
    group_tokens: int = 1,
    device: torch.device | str = "cpu",
    generator: torch.Generator | None = None,
    kept_tolerance: float = KEPT_COUNT_TOLERANCE,
) -> Masking:
    """Draw an independent random mask per sample; `group_tokens` consecutive tokens (in token
    order) share one draw. With the default of 1 the draws equal plain MAE masking's."""
    if group_tokens < 1 or n_patches % group_tokens:
        raise ValueError(
            f"{n_patches} patches do not split into masking groups of {group_tokens} tokens "
            "(mask_group_patches time steps x all frequency patches)"
        )
    n_keep = count_kept(n_patches, mask_ratio, tolerance=kept_tolerance)
    noise = torch.rand(batch, n_patches // group_tokens, device=device, generator=generator)
    group_order = torch.argsort(noise, dim=1)  # ascending: the smallest noise is kept
    offsets = torch.arange(group_tokens, device=device)
    ids_shuffle = (group_order[..., None] * group_tokens + offsets).flatten(1)  # (batch, n_patches)
    ids_restore = torch.argsort(ids_shuffle, dim=1)
    mask = torch.ones(batch, n_patches, device=device)
    mask[:, :n_keep] = 0.0
    mask = torch.gather(mask, 1, ids_restore)  # from shuffled order back to patch order
    return Masking(ids_shuffle=ids_shuffle, ids_restore=ids_restore, mask=mask, n_keep=n_keep)


def gather_tokens(tokens: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    """tokens (batch, n, dim), ids (batch, m) -> (batch, m, dim)."""
    return torch.gather(tokens, 1, ids.unsqueeze(-1).expand(-1, -1, tokens.shape[-1]))
