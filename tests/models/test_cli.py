from __future__ import annotations

import sys

import pytest

import models
from models.__main__ import main


def test_list_prints_every_model_with_params_input_and_mask_ratio(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "argv", ["python -m models", "--list"])
    main()
    lines = capsys.readouterr().out.splitlines()
    rows = {line.split()[0]: line for line in lines[1:]}
    assert set(rows) == set(models.list_models())
    assert rows["mae-en768-12"].split()[1:6] == ["85.45M", "111.32M", "(1000,", "64)", "0.75"]
    assert rows["audiomae++-base"].split()[1:3] == ["141.86M", "154.01M"]
