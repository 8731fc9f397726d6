"""The compute-efficiency frontier of Q(C) (paper Sec. IV-E, Eq. 6, Fig. 5a).

The paper's Q(C) is not a regression through every run: "none of the experimental results surpass
the dashed line ... This curve denotes the computational efficiency frontier". The frontier points
are those whose Q is the best reached at or below their compute by any size or step: sort by C
ascending and keep a point when it sets a new running maximum of Q. Eq. 6 is then fitted to
those points only.
"""

from __future__ import annotations

from typing import Any

import numpy as np


def frontier_mask(compute: Any, q: Any) -> np.ndarray:
    """True where a point is on the frontier: its Q beats every point of equal or lower compute.

    Among points of equal compute only the best can be on it (a tie in Q at equal compute keeps
    the first in input order); a point that only equals an earlier maximum does not set a new one.
    """
    compute, q = np.asarray(compute, dtype=float), np.asarray(q, dtype=float)
    if compute.shape != q.shape:
        raise ValueError(f"compute has shape {compute.shape} but q has {q.shape}")
    # Ascending C; at equal C the best Q first, so the others at that C cannot set a new maximum.
    order = np.lexsort((-q, compute))
    on_frontier = np.zeros(len(q), dtype=bool)
    best = -np.inf
    for index in order:
        if np.isfinite(q[index]) and np.isfinite(compute[index]) and q[index] > best:
            on_frontier[index] = True
            best = q[index]
    return on_frontier
