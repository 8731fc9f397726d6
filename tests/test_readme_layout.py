"""The map of rooms in docs/architecture.md names every package folder on disk, and nothing that is
not there; every package says what its room is for and every module what its concept is.

The map is the first fenced block under "## Package tree": one line per folder (`name/  what it
holds`), nested by two-space indentation. The modules are described where they are read: by their
own docstrings, and each package's in its `__init__.py`.
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
    """'pipeline/' + '  audio/' + '    x.py  ...' -> {'pipeline', 'pipeline/audio', 'pipeline/audio/x.py'}."""
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
            paths.add("/".join(stack))
        elif name.endswith(".py"):
            paths.add("/".join([*stack, name]))
    return paths


def packages_on_disk() -> set[str]:
    return {
        path.parent.relative_to(REPO_ROOT).as_posix()
        for package in PACKAGES
        for path in (REPO_ROOT / package).rglob("__init__.py")
    }


def modules_on_disk() -> list[Path]:
    return sorted(path for package in PACKAGES for path in (REPO_ROOT / package).rglob("*.py"))


def test_tree_parser_nests_by_indentation():
    lines = [
        "pipeline/",
        "  tracking/   MLflow",
        "  audio/",
        "    frontend.py  mel",
        "models/",
    ]
    assert paths_in_tree(lines) == {"pipeline", "pipeline/tracking", "pipeline/audio", "pipeline/audio/frontend.py",
                                    "models"}  # fmt: skip


def test_the_tree_is_the_block_under_its_heading():
    text = "# A\n\n```text\nnot/\n```\n\n## Package tree\n\nintro\n\n```text\nmodels/\n  a/  b\n```\n\n## Next\n"
    assert paths_in_tree(architecture_tree(text)) == {"models", "models/a"}


def test_the_map_names_every_package_and_nothing_else():
    listed = paths_in_tree(architecture_tree(ARCHITECTURE.read_text()))
    on_disk = packages_on_disk()
    assert sorted(on_disk - listed) == [], "package folders missing from the map in docs/architecture.md"
    assert sorted(listed - on_disk) == [], "the map in docs/architecture.md names folders that are not packages"


def test_every_package_and_module_says_what_it_is():
    # The map lists rooms only: a package's docstring is its room's description, a module's its concept.
    import ast

    silent = [
        path.relative_to(REPO_ROOT).as_posix()
        for path in modules_on_disk()
        if not (ast.get_docstring(ast.parse(path.read_text())) or "").strip()
    ]
    assert silent == []
