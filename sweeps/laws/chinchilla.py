"""External check of the law fitter on Chinchilla's Figure 4 points (Besiroglu et al. 2024 refit).

    python -m sweeps.laws.chinchilla [--csv PATH] [--n-bootstrap 400]

Prints the converged fit with bootstrap intervals (expected: E 1.817, A ~482, B ~2085,
alpha 0.348, beta 0.366; alpha 95% about (0.317, 0.373)), then the artefact behind the published
Chinchilla numbers: L-BFGS-B with default tolerances on a *mean* Huber loss (~1e-6, far below
the 1.0 floor of its relative-reduction test), started at the published values, reports success
after a few steps still next to them, while the converged optimizer from the same point walks on
to E 1.817, alpha 0.347, beta 0.367.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.optimize import minimize

from sweeps.laws.fits import CHINCHILLA_HUBER_DELTA, fit_chinchilla
from sweeps.laws.forms import ChinchillaLaw
from sweeps.laws.optimizer import LogSpaceProblem, refit_from
from sweeps.laws.result import LawFit

# Hoffmann et al. (2022), as printed in the paper body.
PUBLISHED_CHINCHILLA = {"E": 1.69, "A": 406.4, "B": 410.7, "alpha": 0.34, "beta": 0.28}
# The five highest-loss points are the small-compute outliers the refit drops.
N_HIGHEST_LOSS_DROPPED = 5


@dataclass(frozen=True, kw_only=True)
class ChinchillaPoints:
    n_params: np.ndarray  # (n,)
    n_tokens: np.ndarray  # (n,) D = training FLOP / (6 N)
    loss: np.ndarray  # (n,)


@dataclass(frozen=True, kw_only=True)
class DefaultToleranceFit:
    params: dict[str, float]
    reported_success: bool
    iterations: int
    start_mean_huber_loss: float  # at the published values
    mean_huber_loss: float  # at the point it stopped
    converged_mean_huber_loss: float  # after a converged refit from the same start


def default_chinchilla_csv() -> Path:
    """Epoch AI's 245 points read off Chinchilla's Figure 4 (params, train_flop, loss), shipped here."""
    return Path(__file__).resolve().parent / "data" / "chinchilla_fig4_points.csv"


def load_chinchilla_points(csv_path: Path) -> ChinchillaPoints:
    """Read params, train_flop, loss; drop the five highest-loss points."""
    table = pd.read_csv(csv_path)
    missing = {"params", "train_flop", "loss"} - set(table.columns)
    if missing:
        raise ValueError(f"{csv_path} lacks column(s) {sorted(missing)}; expected params, train_flop, loss")
    table = table.sort_values("loss").iloc[:-N_HIGHEST_LOSS_DROPPED]
    n_params = table["params"].to_numpy(float)
    return ChinchillaPoints(
        n_params=n_params,
        n_tokens=table["train_flop"].to_numpy(float) / (6.0 * n_params),
        loss=table["loss"].to_numpy(float),
    )


def _problem(points: ChinchillaPoints) -> LogSpaceProblem:
    form = ChinchillaLaw()
    log_loss = np.log(points.loss)
    return LogSpaceProblem(
        log_model=form.log_model,
        log_x=np.log(np.stack([points.n_params, points.n_tokens], axis=1)),
        log_y=log_loss,
        bounds=form.bounds(log_loss),
        huber_delta=CHINCHILLA_HUBER_DELTA,
    )


def default_tolerance_fit(
    points: ChinchillaPoints, start: dict[str, float] = PUBLISHED_CHINCHILLA
) -> DefaultToleranceFit:
    """The careless fit: mean-reduced Huber loss, scipy's default L-BFGS-B tolerances."""
    form, problem = ChinchillaLaw(), _problem(points)
    n = len(points.loss)

    def mean_objective(theta: np.ndarray) -> tuple[float, np.ndarray]:
        value, gradient = problem.objective_and_gradient(theta, 1.0)
        return value / n, gradient / n

    start_theta = form.theta_from_params(start)
    result = minimize(mean_objective, start_theta, jac=True, method="L-BFGS-B", bounds=problem.bounds)
    converged_theta, _ = refit_from(problem, start_theta)
    return DefaultToleranceFit(
        params=form.params_from_theta(result.x),
        reported_success=bool(result.success),
        iterations=int(result.nit),
        start_mean_huber_loss=mean_objective(start_theta)[0],
        mean_huber_loss=float(result.fun),
        converged_mean_huber_loss=mean_objective(converged_theta)[0],
    )


def fit_chinchilla_points(points: ChinchillaPoints, *, n_bootstrap: int, seed: int = 0) -> LawFit:
    return fit_chinchilla(points.n_params, points.n_tokens, points.loss, n_bootstrap=n_bootstrap, seed=seed)


def _format_params(params: dict[str, float]) -> str:
    return ", ".join(f"{name}={value:.4g}" for name, value in params.items())


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--csv", type=Path, default=default_chinchilla_csv(), help="Epoch AI's Figure 4 points")
    parser.add_argument("--n-bootstrap", type=int, default=400, help="bootstrap resamples for the intervals")
    args = parser.parse_args(argv)

    points = load_chinchilla_points(args.csv)
    started = time.perf_counter()
    fit = fit_chinchilla_points(points, n_bootstrap=args.n_bootstrap)
    elapsed_s = time.perf_counter() - started
    print(
        f"converged fit on {fit.n_points} points ({elapsed_s:.1f} s, {fit.diagnostics.n_bootstrap} bootstrap replicates):"
    )
    print(f"  {_format_params(fit.params)}")
    for name, (low, high) in fit.ci.items():
        print(f"  {name} {100 * fit.ci_level:.0f}% interval: ({low:.4g}, {high:.4g})")
    careless = default_tolerance_fit(points)
    print("default-tolerance L-BFGS-B on the mean Huber loss, started at the published values:")
    print(f"  {_format_params(careless.params)}")
    print(
        f"  reported success={careless.reported_success} after {careless.iterations} iterations; mean Huber loss "
        f"{careless.start_mean_huber_loss:.3e} at the start, {careless.mean_huber_loss:.3e} where it stopped, "
        f"{careless.converged_mean_huber_loss:.3e} at the converged optimum"
    )


if __name__ == "__main__":
    main()
