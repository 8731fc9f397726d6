"""`python -m sweeps.laws`: refit a finished study's scaling laws from MLflow, without retraining."""

import argparse

from pipeline.cli.errors import run_cli
from sweeps.study.law_analysis import refit_study


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="sweeps.laws", description="Refit a study's scaling laws from MLflow, without retraining."
    )
    parser.add_argument("--study", required=True, help="the study run's name (as given to sweeps.scaling)")
    parser.add_argument("--tracking-uri", default=None, help="MLflow store; default: the embedded SQLite store")
    parser.add_argument("--n-bootstrap", type=int, default=200, help="bootstrap resamples per law")
    args = parser.parse_args(argv)
    print(refit_study(args.study, tracking_uri=args.tracking_uri, n_bootstrap=args.n_bootstrap))
    return 0


def cli() -> int:
    """`python -m` and the console script: user errors one line, exit code 2 (pipeline.cli.errors)."""
    return run_cli(main, "sweeps.laws")


if __name__ == "__main__":
    raise SystemExit(cli())
