"""A synthetic size x data-volume study drawn from a known Q(N, D), with its FLOPs per sample: what
the advisor's tests and its coverage benchmark (benchmarks/advise_coverage.py) fit, to check that
the fit and the advice recover the law that made the points."""

from __future__ import annotations

import numpy as np
import pandas as pd

from sweeps.laws.allocation import SAMPLES_PER_HOUR
from sweeps.laws.forms import JointLaw

TRUE_LAW = {"q_inf": 0.85, "alpha": 0.5, "n_c": 2e4, "alpha_n": 0.3, "d_c": 0.2, "alpha_d": 0.4}
TOKENS_PER_SAMPLE = 250.0  # FLOPs per sample = 6 N x 250


def flops_per_sample(n: np.ndarray | float) -> np.ndarray | float:
    return 6.0 * np.asarray(n, float) * TOKENS_PER_SAMPLE


def synthetic_study(seed: int, *, noise: float = 0.003, seeds: int = 2, law: dict | None = None) -> pd.DataFrame:
    """5 sizes x 5 data volumes x `seeds` training seeds; each trial sees its hours once."""
    rng = np.random.default_rng(seed)
    rows = []
    for n in np.geomspace(1e5, 1e7, 5):
        for hours in np.geomspace(1.0, 100.0, 5):
            configuration = f"n{n:.2e}-h{hours:.3g}"
            for replicate in range(seeds):
                rows.append({
                    "trial": configuration + (f"-seed{replicate}" if replicate else ""), "configuration": configuration,
                    "n_params": n, "hours": hours, "status": "ok",
                    "q": float(JointLaw().predict(law or TRUE_LAW, n, hours)) + rng.normal(0.0, noise),
                    "flops": flops_per_sample(n) * hours * SAMPLES_PER_HOUR, "training_flops_per_sample": flops_per_sample(n),
                })  # fmt: skip
    return pd.DataFrame(rows)
