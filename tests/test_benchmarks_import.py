"""Every benchmark script imports (its names resolve after a move or a rename); none is run here."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

BENCHMARKS = sorted((Path(__file__).resolve().parents[1] / "benchmarks").glob("*.py"))


@pytest.mark.parametrize("path", BENCHMARKS, ids=lambda path: path.name)
def test_the_benchmark_imports(path, monkeypatch):
    monkeypatch.syspath_prepend(str(path.parent))  # benchmarks import their siblings by name
    spec = importlib.util.spec_from_file_location(f"benchmark_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, module)  # dataclasses look their module up there
    spec.loader.exec_module(module)  # runs the imports and definitions; main() stays behind its guard
    assert callable(getattr(module, "main", None)), f"{path.name} has no main()"
