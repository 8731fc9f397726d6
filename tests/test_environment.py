"""The developer environment: the README's activation line, the editable install, the entry points."""

from __future__ import annotations

import ast
import re
import subprocess
import tomllib
from importlib.util import find_spec
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())
ACTIVATE = "source .venv/bin/activate"


def test_activation_line_works_in_a_clean_shell():
    """scripts/check_activation.sh: a new shell with only the README's line runs python -m, ray, mlflow."""
    done = subprocess.run(
        ["bash", str(REPO_ROOT / "scripts" / "check_activation.sh")], capture_output=True, text=True, timeout=500
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"`{ACTIVATE}` works in a clean shell" in done.stdout


def test_readme_quick_start_gives_the_checked_activation_line():
    readme = (REPO_ROOT / "README.md").read_text()
    quick_start = readme.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    assert ACTIVATE in quick_start
    assert f"ACTIVATE='{ACTIVATE}'" in (REPO_ROOT / "scripts" / "check_activation.sh").read_text()


def test_every_entry_point_names_a_main_function_that_python_m_also_runs():
    scripts = PYPROJECT["project"]["scripts"]
    assert set(scripts) == {
        f"audioscale-{name}"
        for name in ("corpus", "prep", "pretrain", "evaluate", "study", "laws", "models", "external")
    }
    for name, target in scripts.items():
        module, function = target.split(":")
        spec = find_spec(module)  # imports the parent packages only, not the (heavy) module itself
        assert spec is not None and spec.origin, (name, module)
        tree = ast.parse(Path(spec.origin).read_text())
        functions = {node.name for node in tree.body if isinstance(node, ast.FunctionDef)}
        assert function in functions, (name, target)
        # `python -m <module>` must run it too (the README's and `ray job submit`'s form).
        guards = [node for node in tree.body if isinstance(node, ast.If) and "__main__" in ast.unparse(node.test)]
        assert guards and function in ast.unparse(guards[0]), (name, "no `if __name__ == '__main__':` calling it")


def test_dev_extra_matches_requirements_dev():
    """pyproject lists requirements-dev.txt inline (setuptools' `file =` rejects its `-r` line)."""
    lines = (REPO_ROOT / "requirements-dev.txt").read_text().splitlines()
    wanted = [line.strip() for line in lines if line.strip() and not re.match(r"\s*(#|-r\s)", line)]
    assert PYPROJECT["project"]["optional-dependencies"]["dev"] == wanted
    assert any(line.strip() == "-r requirements.txt" for line in lines)
    assert PYPROJECT["tool"]["setuptools"]["dynamic"]["dependencies"] == {"file": ["requirements.txt"]}
