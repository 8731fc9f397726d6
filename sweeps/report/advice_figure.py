"""The advisor's figure: Q along the iso-compute curves of the budget and a decade and two below it,
each curve's best size marked, the budget's with its 95% interval of N_opt."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # no display on workers and CI; must precede pyplot

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from sweeps.laws.allocation import quality_optimum  # noqa: E402
from sweeps.laws.forms import JointLaw  # noqa: E402
from sweeps.report.advice import Advice  # noqa: E402


def iso_compute_figure(advice: Advice, path: str | Path) -> Path:
    """Write the figure to `path` (PNG) and return it."""
    law = advice.fit.params
    sizes = np.geomspace(*advice.n_range, 400)
    figure, ax = plt.subplots(figsize=(6.4, 4.2))
    for factor, style in ((0.01, ":"), (0.1, "--"), (1.0, "-")):
        compute = advice.budget_flops * factor
        q = JointLaw().predict(law, sizes, advice.flops.hours_for(compute, sizes))
        (line,) = ax.plot(sizes, q, style, label=f"C = {compute:.2g} FLOPs")
        best = quality_optimum(lambda n, d: JointLaw().predict(law, n, d), advice.flops, compute, advice.n_range)
        ax.plot(best.n_params, best.q, "o", color=line.get_color())
    n = advice.n_params
    if np.isfinite(n.low):
        ax.errorbar(n.value, advice.q.value, xerr=[[n.value - n.low], [n.high - n.value]], fmt="*", color="black",
                    markersize=11, capsize=4, label="the budget's N_opt (95%)")  # fmt: skip
    ax.set_xscale("log")
    ax.set_xlabel("parameters N (D = C / (FLOPs per sample x samples))")
    ax.set_ylabel("predicted Q")
    ax.set_title("Q(N, D) along iso-compute curves")
    ax.legend(fontsize=7)
    figure.tight_layout()
    path = Path(path)
    figure.savefig(path, dpi=120)
    plt.close(figure)
    return path
