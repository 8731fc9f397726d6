"""RankMe against its definition and the reference values in evaluation.md."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from pipeline.rankme.effective_rank import (
    rankme,
    rankme_from_singular_values,
    rankme_with_shape,
    sample_fixed_n,
    singular_values,
    singular_values_on_device,
)


def _direct_svd_rankme(matrix: np.ndarray, eps: float = 1e-7) -> float:
    sigma = np.linalg.svd(matrix.astype(np.float64), compute_uv=False)
    p = sigma / sigma.sum() + eps
    return float(np.exp(-np.sum(p * np.log(p))))


def test_gram_route_matches_direct_svd_on_tall_matrix():
    rng = np.random.default_rng(1)
    # Anisotropic spectrum so the value is not a trivial near-maximum.
    matrix = (rng.standard_normal((3000, 64)) * np.geomspace(10.0, 0.01, 64)).astype(np.float32)
    assert rankme(matrix) == pytest.approx(_direct_svd_rankme(matrix), rel=1e-9)


def test_wide_matrix_uses_the_smaller_side_and_matches_direct_svd():
    matrix = np.random.default_rng(2).standard_normal((40, 500)).astype(np.float32)
    assert len(singular_values(matrix)) == 40
    assert rankme(matrix) == pytest.approx(_direct_svd_rankme(matrix), rel=1e-9)


def test_rank_one_matrix_gives_about_one():
    rng = np.random.default_rng(3)
    matrix = np.outer(rng.standard_normal(2000), rng.standard_normal(128))
    assert rankme(matrix) == pytest.approx(1.0, abs=1e-3)


def test_torch_and_numpy_inputs_agree():
    matrix = torch.randn(1000, 32, generator=torch.Generator().manual_seed(4))
    assert rankme(matrix) == pytest.approx(rankme(matrix.numpy()), rel=1e-12)


@pytest.mark.parametrize("shape", [(3000, 64), (40, 500), (90, 64)])  # tall (Gram), wide (Gram of Z^T), square (SVD)
def test_device_route_matches_the_numpy_route(shape):
    """The route a GPU tensor takes, run here on a CPU tensor: the same float64 values as numpy's."""
    generator = torch.Generator().manual_seed(5)
    matrix = torch.randn(*shape, generator=generator) * torch.logspace(1, -2, shape[1])
    on_device = singular_values_on_device(matrix)
    assert on_device.shape == (min(shape),)
    np.testing.assert_allclose(on_device, singular_values(matrix.numpy()), rtol=1e-9, atol=1e-9 * on_device[0])
    assert rankme_from_singular_values(on_device) == pytest.approx(_direct_svd_rankme(matrix.numpy()), rel=1e-9)


def test_device_route_refuses_bad_inputs_with_the_same_errors():
    with pytest.raises(ValueError, match="2-D"):
        singular_values_on_device(torch.ones(2, 3, 4))
    with pytest.raises(ValueError, match="NaN"):
        singular_values_on_device(torch.tensor([[1.0, float("nan")], [0.0, 1.0]]))


@pytest.mark.parametrize(("n_samples", "expected"), [(256, 244.0), (1024, 673.0), (8192, 759.0), (25_600, 765.0)])
def test_isotropic_gaussian_matches_evaluation_reference(n_samples, expected):
    matrix = np.random.default_rng(5).standard_normal((n_samples, 768)).astype(np.float32)
    assert rankme(matrix) == pytest.approx(expected, abs=1.5)


def test_common_mean_offset_lowers_rankme_as_in_reference():
    matrix = np.random.default_rng(6).standard_normal((25_600, 768)).astype(np.float32)
    assert rankme(matrix + 3.0) == pytest.approx(549.0, abs=2.0)


def test_eps_is_added_after_normalising():
    # Two equal singular values: p = 0.5 + eps each.
    eps = 1e-3
    p = 0.5 + eps
    assert rankme_from_singular_values(np.array([2.0, 2.0]), eps=eps) == pytest.approx(np.exp(-2 * p * np.log(p)))


def test_rankme_with_shape_records_n_and_k():
    result = rankme_with_shape(np.random.default_rng(7).standard_normal((300, 20)))
    assert (result.n_samples, result.n_features) == (300, 20)
    assert 1.0 <= result.value <= 20.0


def test_fixed_n_sample_is_seeded_and_exact():
    matrix = np.arange(1000 * 3, dtype=np.float32).reshape(1000, 3)
    first = sample_fixed_n(matrix, n_samples=100, seed=11)
    assert first.shape == (100, 3)
    np.testing.assert_array_equal(first, sample_fixed_n(matrix, n_samples=100, seed=11))
    assert not np.array_equal(first, sample_fixed_n(matrix, n_samples=100, seed=12))


def test_fixed_n_sample_refuses_too_few_rows():
    with pytest.raises(ValueError, match="only 10 are available"):
        sample_fixed_n(np.ones((10, 4)), n_samples=20)


def test_bad_inputs_raise_clear_errors():
    with pytest.raises(ValueError, match="2-D"):
        rankme(np.ones((2, 3, 4)))
    with pytest.raises(ValueError, match="NaN"):
        rankme(np.array([[1.0, np.nan], [0.0, 1.0]]))
    with pytest.raises(ValueError, match="all-zero"):
        rankme(np.zeros((10, 3)))
