from __future__ import annotations

import pytest
import torch

from models.layers.masking import count_kept, gather_tokens, random_masking


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


def _split_groups(mask: torch.Tensor, group_tokens: int) -> torch.Tensor:
    """(batch, n) -> (batch, n / group_tokens) count of removed tokens in each group."""
    return mask.reshape(mask.shape[0], -1, group_tokens).sum(dim=-1)


def test_grouped_masking_keeps_or_removes_each_pair_whole() -> None:
    # 250 patches at 0.75: Dasheng keeps int(62.5) = 62, an even count, so every pair is whole
    masking = random_masking(6, 250, 0.75, group_tokens=2, generator=torch.Generator().manual_seed(0))
    per_pair = _split_groups(masking.mask, 2)
    assert set(per_pair.unique().tolist()) == {0.0, 2.0}
    assert masking.n_keep == 62 and masking.mask.sum(dim=1).tolist() == [188.0] * 6


def test_odd_kept_count_splits_exactly_one_pair_as_dasheng() -> None:
    # 0.7 keeps 75 patches: the ratio's count is kept, so one pair straddles keep/remove
    masking = random_masking(6, 250, 0.7, group_tokens=2, generator=torch.Generator().manual_seed(1))
    assert masking.mask.sum(dim=1).tolist() == [175.0] * 6
    assert ((_split_groups(masking.mask, 2) == 1.0).sum(dim=1) == 1).all()


def test_grouped_restore_permutation_inverts_the_shuffle() -> None:
    tokens = torch.randn(4, 40, 8)
    masking = random_masking(4, 40, 0.6, group_tokens=4, generator=torch.Generator().manual_seed(2))
    shuffled = gather_tokens(tokens, masking.ids_shuffle)
    assert torch.equal(gather_tokens(shuffled, masking.ids_restore), tokens)
    kept = torch.zeros(4, 40).scatter(1, masking.ids_keep, 1.0)
    assert torch.equal(masking.mask, 1.0 - kept)


def test_a_group_spans_every_frequency_patch_of_its_time_steps() -> None:
    # 25 time steps x 4 frequency patches, pairs of time steps: groups of 8 consecutive tokens
    masking = random_masking(3, 200, 0.6, group_tokens=8, generator=torch.Generator().manual_seed(3))
    assert set(_split_groups(masking.mask, 8).unique().tolist()) == {0.0, 8.0}  # keeps 80: 10 groups


@pytest.mark.parametrize(
    "n_patches,ratios",
    [(250, [round(0.30 + 0.05 * i, 2) for i in range(14)]), (50, [0.5, 0.6, 0.7, 0.75, 0.8, 0.9])],
)
def test_the_study_mask_grid_gives_valid_pair_masks(n_patches: int, ratios: list[float]) -> None:
    for ratio in ratios:
        masking = random_masking(4, n_patches, ratio, group_tokens=2)
        n_keep = count_kept(n_patches, ratio)
        assert masking.n_keep == n_keep
        assert masking.mask.sum(dim=1).tolist() == [float(n_patches - n_keep)] * 4
        assert torch.equal(masking.ids_shuffle.sort(dim=1).values, torch.arange(n_patches).expand(4, -1))
        assert ((_split_groups(masking.mask, 2) == 1.0).sum(dim=1) == n_keep % 2).all()


def test_groups_that_do_not_tile_the_patches_are_rejected() -> None:
    with pytest.raises(ValueError, match="mask_group_patches"):
        random_masking(1, 25, 0.5, group_tokens=2)


def test_kept_count_follows_dashengs_int_without_tolerance_where_asked():
    # Dasheng's len_keep = int(L * (1 - mask_ratio)) on L = 250 (dasheng/train/models.py): 62, 49, 24.
    assert [count_kept(250, ratio, tolerance=0.0) for ratio in (0.75, 0.8, 0.9)] == [62, 49, 24]
    # The pipeline's tolerant count (the CPU profile's models): float error does not drop a patch.
    assert [count_kept(250, ratio) for ratio in (0.75, 0.8, 0.9)] == [62, 50, 25]


def test_study_mae_keeps_dashengs_counts_and_the_debug_model_its_own():
    import torch

    import models

    torch.manual_seed(0)
    for name, frames, expected in (("mae-en256-1", 1000, {0.8: 49, 0.9: 24}), ("mae-debug", 200, {0.8: 10, 0.9: 5})):
        for ratio, kept in expected.items():
            output = models.build_model(name, mask_ratio=ratio)(torch.randn(1, frames, 64))
            assert int((output.mask[0] == 0).sum()) == kept, (name, ratio)


# One debug model of each family, built without weights: each refuses a mask ratio through the one check.
FAMILY_MODELS = ["mae-debug", "audiomae++-debug", "axlstm-debug", "ssast-debug-patch", "hubert-debug", "wav2vec2-debug"]


@pytest.mark.parametrize("name", FAMILY_MODELS)
@pytest.mark.parametrize("ratio", [0.0, 1.0, -0.1, True])
def test_every_family_refuses_a_mask_ratio_outside_0_1_with_the_one_message(name, ratio) -> None:
    from models.registry import model_entry

    with (
        torch.device("meta"),
        pytest.raises(ValueError, match=r"mask_ratio must be a fraction of the patches in \(0, 1\)"),
    ):
        model_entry(name).build(mask_ratio=ratio)


def test_the_run_config_refuses_it_with_the_same_message_naming_its_flag() -> None:
    from pipeline.pretrain.config import PretrainConfig

    with pytest.raises(ValueError, match=r"^--mask-ratio must be a fraction of the patches in \(0, 1\), got 1.0$"):
        PretrainConfig.from_flat(mask_ratio=1.0)


def test_no_module_checks_a_mask_ratio_range_itself() -> None:
    """The range lives in check_mask_ratio alone: a second copy would drift (there were seven)."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[3]
    copies = [
        str(path.relative_to(root))
        for folder in ("models", "pipeline", "sweeps")
        for path in (root / folder).rglob("*.py")
        if "mask_ratio < 1" in path.read_text() and path.name != "masking.py"
    ]
    assert copies == []
