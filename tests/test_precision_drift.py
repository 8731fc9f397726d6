"""benchmarks/precision_drift.py: whether bf16 or fused AdamW moves where training ends, against the
seed-to-seed spread. Run at debug size on the CPU with the same code the GPU run uses."""

from __future__ import annotations

import pytest
import torch

from benchmarks import precision_drift

CPU = torch.device("cpu")
SMALL = {"seeds": 2, "steps": 4, "window": 2, "batch": 2, "pool": 2}


def test_fused_adamw_lands_where_the_reference_does_and_seeds_give_the_spread():
    row = precision_drift.compare("mae-debug", "fused", CPU, say=lambda line: None, **SMALL)
    # Fused AdamW reorders fp32 arithmetic only: the same run to rounding; another seed moves it far more.
    assert row["mean_gap"] < 1e-4 < row["seed_spread"]
    assert row["verdict"] == "within the seed spread"
    assert len(row["reference_window_means"]) == len(row["setting_window_means"]) == 2


def test_bf16_really_changes_the_arithmetic_it_is_judged_on():
    lines: list[str] = []
    row = precision_drift.compare("mae-debug", "bf16", CPU, say=lines.append, **SMALL)
    assert row["mean_gap"] > 0  # a positive control: the comparison sees a precision change at all
    assert [line.split(":")[0] for line in lines] == ["mae-debug bf16 seed 1", "mae-debug bf16 seed 2"]


def test_a_pair_without_a_known_setting_is_refused_by_name(capsys):
    with pytest.raises(SystemExit):
        precision_drift.main(["mae-debug:fp8"])
    assert "'mae-debug:fp8'" in capsys.readouterr().err
