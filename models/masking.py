"""Random masking of patch tokens, MAE style: shuffle by argsort of noise, keep the first.

mask: 1 = removed (models/interface.py). `ids_shuffle[:, :n_keep]` are the visible patches in the
order the encoder sees them; `ids_shuffle[:, n_keep:]` are the removed ones in random order (the
CrossMAE decoder predicts a prefix of them). `ids_restore` is the inverse permutation: gathering a
shuffled sequence with it puts every token back at its patch position.
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


def count_kept(n_patches: int, mask_ratio: float) -> int:
    """Visible patches for a mask ratio: floor(N * (1 - ratio)), as MAE.

    The small tolerance keeps float error from dropping a patch (250 * (1 - 0.8) = 49.999...).
    """
    if not 0.0 <= mask_ratio < 1.0:
        raise ValueError(f"mask_ratio={mask_ratio} must be in [0, 1)")
    n_keep = int(n_patches * (1.0 - mask_ratio) + 1e-6)
    if n_keep < 1:
        raise ValueError(f"mask_ratio={mask_ratio} leaves no visible patch of {n_patches}")
    return n_keep


def random_masking(
    batch: int,
    n_patches: int,
    mask_ratio: float,
    *,
    device: torch.device | str = "cpu",
    generator: torch.Generator | None = None,
) -> Masking:
    """Draw an independent random mask per sample."""
    n_keep = count_kept(n_patches, mask_ratio)
    noise = torch.rand(batch, n_patches, device=device, generator=generator)
    ids_shuffle = torch.argsort(noise, dim=1)  # ascending: the smallest noise is kept
    ids_restore = torch.argsort(ids_shuffle, dim=1)
    mask = torch.ones(batch, n_patches, device=device)
    mask[:, :n_keep] = 0.0
    mask = torch.gather(mask, 1, ids_restore)  # from shuffled order back to patch order
    return Masking(ids_shuffle=ids_shuffle, ids_restore=ids_restore, mask=mask, n_keep=n_keep)


def gather_tokens(tokens: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    """tokens (batch, n, dim), ids (batch, m) -> (batch, m, dim)."""
    return torch.gather(tokens, 1, ids.unsqueeze(-1).expand(-1, -1, tokens.shape[-1]))
