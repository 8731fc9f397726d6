"""Q(C) is fitted to the compute-efficiency frontier (paper Eq. 6, Fig. 5a), picked by a running maximum."""

from __future__ import annotations

import numpy as np

from sweeps.laws.frontier import frontier_mask


def test_frontier_picks_the_points_that_set_a_new_best_q_at_their_compute():
    # Two model sizes over training: the small one is best at low compute, the large one later.
    compute = np.array([1.0, 2.0, 4.0, 8.0, 3.0, 6.0, 12.0, 24.0, 16.0])
    q = np.array([0.40, 0.50, 0.55, 0.57, 0.45, 0.60, 0.66, 0.70, 0.65])
    # Sorted by C: 1 (.40 new), 2 (.50 new), 3 (.45 no), 4 (.55 new), 6 (.60 new), 8 (.57 no),
    # 12 (.66 new), 16 (.65 no), 24 (.70 new).
    expected = [True, True, True, False, False, True, True, True, False]
    assert frontier_mask(compute, q).tolist() == expected


def test_at_equal_compute_only_the_best_point_and_no_ties_enter():
    compute = np.array([1.0, 1.0, 2.0, 3.0])
    q = np.array([0.3, 0.5, 0.5, 0.6])
    assert frontier_mask(compute, q).tolist() == [False, True, False, True]


def test_input_order_does_not_matter():
    rng = np.random.default_rng(0)
    compute, q = rng.uniform(1, 100, 30), rng.uniform(0, 1, 30)
    mask = frontier_mask(compute, q)
    order = rng.permutation(30)
    assert frontier_mask(compute[order], q[order]).tolist() == mask[order].tolist()
    on = np.flatnonzero(mask)
    # No point at lower or equal compute beats a frontier point.
    assert not np.any((compute[None, :] <= compute[on][:, None]) & (q[None, :] > q[on][:, None]))


def test_intervals_that_touch_at_a_bound_do_not_disagree_but_separate_ones_do():
    from types import SimpleNamespace

    from sweeps.report.study_fits import parameters_disagree

    # The reference reaches Q_inf = 1 as 1 - 9e-14; the alternative's bound is exactly 1.
    reference = SimpleNamespace(ci={"q_inf": (1 - 9e-14, 1 - 9e-14), "alpha": (0.2, 0.3)})
    alternative = SimpleNamespace(ci={"q_inf": (1.0, 1.0), "alpha": (0.5, 0.6)})
    assert parameters_disagree(reference, alternative) == ["alpha"]
