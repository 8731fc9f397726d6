"""The package tree in docs/architecture.md names every module on disk, and nothing that is not there.

The tree is the first fenced block under "## Package tree": one line per folder (`name/`) or
module (`name.py  what it does`), nested by two-space indentation. Package `__init__.py` files
are left out on both sides (they hold only a docstring).
"""

from __future__ import annotations

import re
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
ARCHITECTURE = REPO_ROOT / "docs" / "architecture.md"
TREE_HEADING = "\n## Package tree\n"
PACKAGES = ("pipeline", "models", "sweeps")


def architecture_tree(text: str) -> list[str]:
    assert TREE_HEADING in text, f"no '{TREE_HEADING.strip()}' section in {ARCHITECTURE.name}"
    section = text.split(TREE_HEADING, 1)[1].split("\n## ", 1)[0]
    block = re.search(r"```(?:text)?\n(.*?)```", section, re.S)
    assert block, f"no fenced tree under '{TREE_HEADING.strip()}'"
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
    lines = [
        "pipeline/",
        "  tracking/",
        "    runs.py   MLflow",
        "  audio/",
        "    frontend.py  mel",
        "models/",
        "  x.py  y",
    ]
    assert paths_in_tree(lines) == {"pipeline/tracking/runs.py", "pipeline/audio/frontend.py", "models/x.py"}


def test_the_tree_is_the_block_under_its_heading():
    text = "# A\n\n```text\nnot/\n```\n\n## Package tree\n\nintro\n\n```text\nmodels/\n  a.py  b\n```\n\n## Next\n"
    assert paths_in_tree(architecture_tree(text)) == {"models/a.py"}


def test_architecture_tree_matches_the_modules_on_disk():
    listed = paths_in_tree(architecture_tree(ARCHITECTURE.read_text()))
    on_disk = modules_on_disk()
    assert sorted(on_disk - listed) == [], "modules missing from the package tree in docs/architecture.md"
    assert sorted(listed - on_disk) == [], "the package tree in docs/architecture.md names modules that do not exist"
