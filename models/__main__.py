"""`python -m models --list`: every registered model with its parameters, input and mask ratio.

`models` is the house's bottom floor (pure PyTorch) and imports nothing of `pipeline`, so this one-flag
listing builds its parser with argparse directly; its prog is the same `python -m models` every other
command's front door (`pipeline.cli.command`) uses, so its refusals read alike.
"""

from __future__ import annotations

import argparse

import torch

from models.interface import count_parameters
from models.registry import list_models, model_entry


def describe_models() -> list[dict[str, object]]:
    """One row per registered model, built on the meta device (no memory, same modules)."""
    rows = []
    for name in list_models():
        entry = model_entry(name)
        with torch.device("meta"):
            model = entry.build()
        rows.append(
            {
                "name": name,
                "encoder_params": count_parameters(model.encoder),
                "total_params": count_parameters(model),
                "input_shape": model.spec.input_shape,
                "mask_ratio": model.spec.mask_ratio,
                "paper": entry.paper_parameters,
            }
        )
    return rows


PROG = "python -m models"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n\n")[0])
    parser.add_argument("--list", action="store_true", help="print the registered models")
    if not parser.parse_args(argv).list:
        parser.print_help()
        return 0
    print(f"{'name':<18} {'encoder':>10} {'total':>10} {'input (frames, mel)':>20} {'mask':>5}  paper")
    for row in describe_models():
        print(
            f"{row['name']:<18} {row['encoder_params'] / 1e6:>9.2f}M {row['total_params'] / 1e6:>9.2f}M "
            f"{str(row['input_shape']):>20} {row['mask_ratio']:>5.2f}  {row['paper']}"
        )
    return 0


def cli() -> int:
    """`python -m` and the console script (a usage error: argparse's one line, exit code 2)."""
    return main()


if __name__ == "__main__":
    raise SystemExit(cli())
