"""The README's architecture tree names every module on disk, and nothing that is not there.

The tree is the first fenced block under "## Architecture": one line per folder (`name/`) or
module (`name.py  what it does`), nested by two-space indentation. Package `__init__.py` files
are left out on both sides (they hold only a docstring).
"""

from __future__ import annotations

import re
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("pipeline", "models", "sweeps")


def architecture_tree(readme: str) -> list[str]:
    section = readme.split("\n## Architecture", 1)[1]
    block = re.search(r"```(?:text)?\n(.*?)```", section, re.S)
    assert block, "no fenced tree under '## Architecture'"
    return block.group(1).splitlines()


def paths_in_tree(lines: list[str]) -> set[str]:
    """'pipeline/' + '  audio/' + '    frontend.py  ...' -> {'pipeline/audio/frontend.py'}."""
    stack: list[str] = []
    paths = set()
    for line in lines:
        if not line.strip():
            continue
        depth = (len(line) - len(line.lstrip(" "))) // 2
        name = line.split()[0]
        del stack[depth:]
        if name.endswith("/"):
            stack.append(name.rstrip("/"))
        elif name.endswith(".py"):
            paths.add("/".join([*stack, name]))
    return paths


def modules_on_disk() -> set[str]:
    return {
        path.relative_to(REPO_ROOT).as_posix()
        for package in PACKAGES
        for path in (REPO_ROOT / package).rglob("*.py")
        if path.name != "__init__.py"
    }


def test_tree_parser_nests_by_indentation():
    lines = ["pipeline/", "  tracking.py   MLflow", "  audio/", "    frontend.py  mel", "models/", "  mae.py  x"]
    assert paths_in_tree(lines) == {
        "pipeline/tracking/runs.py",
        "pipeline/audio/frontend.py",
        "models/mae/study_mae.py",
    }


def test_readme_tree_matches_the_modules_on_disk():
    listed = paths_in_tree(architecture_tree((REPO_ROOT / "README.md").read_text()))
    on_disk = modules_on_disk()
    assert sorted(on_disk - listed) == [], "modules missing from the README's architecture tree"
    assert sorted(listed - on_disk) == [], "README's architecture tree names modules that do not exist"
