"""A param as the user typed it: floats without the binary rounding's tail, nested values too."""

from __future__ import annotations

from pipeline.tracking.param_text import MAX_PARAM_CHARS, param_text


def test_floats_are_written_as_typed():
    assert param_text(0.1 * 3e-4) == "3e-05"  # the UI printed 0.000029999999999999997
    assert param_text(0.7) == "0.7" and param_text(300) == "300" and param_text(True) == "true"
    assert param_text({"lr": [0.1 * 3e-4, 2]}) == '{"lr": [3e-05, 2]}'
    assert param_text(1 / 3) == "0.333333333333"  # 12 significant digits: more than any recipe types
    assert param_text("0.000029999999999999997") == "0.000029999999999999997"  # text stays as it is
    assert len(param_text("x" * 10_000)) == MAX_PARAM_CHARS
