"""`python -m sweeps.laws`: refit a finished study's scaling laws from MLflow, without retraining."""

import dataclasses

from pipeline.cli.command import Command
from pipeline.cli.flags import flag
from sweeps.study.law_analysis import refit_study

COMMAND = Command("sweeps.laws", "Refit a study's scaling laws from MLflow, without retraining.")


@dataclasses.dataclass(frozen=True, kw_only=True)
class LawsCommandConfig:
    study: str = flag("--study", None, "the study run's name (as given to sweeps.scaling)", required=True)
    tracking_uri: str | None = flag("--tracking-uri", None, "MLflow store; default: the embedded SQLite store")
    n_bootstrap: int = flag("--n-bootstrap", 200, "bootstrap resamples per law")


def main(argv: list[str] | None = None) -> int:
    config, _ = COMMAND.parse(LawsCommandConfig, argv)
    print(refit_study(config.study, tracking_uri=config.tracking_uri, n_bootstrap=config.n_bootstrap))
    return 0


def cli() -> int:
    """`python -m` and the console script: user errors one line, exit code 2 (pipeline.cli.command)."""
    return COMMAND.run(main)


if __name__ == "__main__":
    raise SystemExit(cli())
