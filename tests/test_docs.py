"""Every command and repository path the documentation names is real. Parsing only: nothing is run.

Documents: README.md, docs/*.md and cluster/README.md.

Commands are read from fenced code blocks (continued lines joined, `# comments` dropped) and from
inline code spans. A command starts at `python -m`, `python benchmarks/` or `bash scripts/`
anywhere in a line (so the entrypoint after `ray job submit ... --` counts) and ends at the end of
the line or at a shell separator (`;`, `&&`, `||`, `|`, `&`).

- `python -m MODULE ARGS`: MODULE must be importable. For a module of this project the arguments
  must parse with the command's real parser: `build_parser()` where the module (or its package's
  `__main__`) has one, otherwise its `main` is called with argparse stopped right after parsing.
- `python benchmarks/FILE.py ARGS`: the file exists and declares every `--flag` given to it.
- `bash scripts/FILE.sh ARGS`: the file exists.

A command is only a reference, whose module or file is checked but whose arguments are not, in two
places: an inline span that names the command alone (`python -m pipeline.prep`, no arguments), and
a ```text block (a package tree, a data-flow diagram, a program's output), where commands stand
beside their descriptions. A message a command prints (`python -m pipeline.prep: error: ...`, the
module followed by a colon) is a reference too.

The placeholder convention: a command is written as one complete example (no `[optional]` parts,
no `a|b` alternatives, no `...`; `--help` lists the rest), and an argument the reader replaces is
written in capitals from PLACEHOLDERS below (`--study NAME`, `--hear-module PKG.MODULE`,
`--shards DIR`). The test substitutes a sample value for each before parsing; any other argument
written in capitals fails, so a new placeholder is added to PLACEHOLDERS first.

Paths: every `models/`, `pipeline/`, `sweeps/`, `benchmarks/`, `scripts/`, `docs/`, `tests/` and
`cluster/` path named anywhere in the text exists (a part in angle brackets, as in
`tests/models/<family>/`, ends the path). Relative markdown links resolve from the document's
folder, and a `#anchor` names a heading of the target (GitHub's heading ids).

README.md stays at most 250 lines.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import inspect
import re
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
DOCUMENTS = sorted([REPO_ROOT / "README.md", REPO_ROOT / "cluster" / "README.md", *(REPO_ROOT / "docs").glob("*.md")])
README_MAX_LINES = 250
PROJECT_PACKAGES = ("pipeline", "models", "sweeps")
PATH_ROOTS = ("models", "pipeline", "sweeps", "benchmarks", "scripts", "docs", "tests", "cluster")

PLACEHOLDERS = {
    "DIR": "/tmp/audioscale-docs/dir",
    "FILE": "/tmp/audioscale-docs/model.pt",
    "HOME": "/tmp/audioscale-docs/home",
    "ID": "0123456789abcdef0123456789abcdef",
    "N": "4",
    "NAME": "masks",
    "PKG.MODULE": "tests.support.toy_hear_module",
    "URI": "sqlite:////tmp/audioscale-docs/mlflow.db",
}
CAPITALS = re.compile(r"[A-Z][A-Z0-9_.]*")

FENCE = re.compile(r"^ {0,3}```([^\n]*)\n(.*?)^ {0,3}```", re.S | re.M)
INLINE_CODE = re.compile(r"(?<!`)`([^`\n]+)`(?!`)")
COMMAND_START = re.compile(r"python -m |python benchmarks/|bash scripts/")
SEPARATOR = re.compile(r"\s(?:;|&&|\|\||\||&)(?:\s|$)|;")
PATH = re.compile(rf"(?<![\w./~$<>@:-])(?:{'|'.join(PATH_ROOTS)})/[\w./+-]*")
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


@dataclass(frozen=True)
class Command:
    document: str
    words: tuple[str, ...]
    reference: bool = False  # only the module or file is checked, not the arguments

    def __str__(self) -> str:
        return f"{self.document}: {' '.join(self.words)}"


@dataclass(frozen=True)
class CodeText:
    command_lines: list[str]  # lines of the shell blocks, continued lines joined
    reference_lines: list[str]  # lines of the ```text blocks
    spans: list[str]  # inline code outside the blocks


def code_text(markdown: str) -> CodeText:
    command_lines, reference_lines = [], []
    for kind, block in FENCE.findall(markdown):
        lines = block.replace("\\\n", " ").splitlines()
        (reference_lines if kind.strip() == "text" else command_lines).extend(lines)
    return CodeText(command_lines, reference_lines, INLINE_CODE.findall(FENCE.sub("", markdown)))


def commands_in(text: str, document: str) -> list[Command]:
    found = []
    for start in COMMAND_START.finditer(text):
        rest = text[start.start() :]
        separator = SEPARATOR.search(rest)
        words = tuple(shlex.split(rest[: separator.start()] if separator else rest, comments=True))
        if len(words) > 2 and words[1] == "-m" and words[2].endswith(":"):  # a message it prints, not a command
            found.append(Command(document, words[:2] + (words[2].removesuffix(":"),), reference=True))
            continue
        found.append(Command(document, words, reference=False))
    return found


def references_in(text: str, document: str) -> list[Command]:
    """The command names in a line of prose-like text: `python -m X`, `python benchmarks/F.py`, `bash scripts/F.sh`."""
    found = []
    for match in re.finditer(
        r"python -m ([\w.]+)|(python) (benchmarks/[\w.-]+\.py)|(bash) (scripts/[\w.-]+\.sh)", text
    ):
        module, python, script, bash, shell_script = match.groups()
        words = ("python", "-m", module.rstrip(".")) if module else (python, script) if python else (bash, shell_script)
        found.append(Command(document, words, reference=True))
    return found


def all_commands() -> list[Command]:
    commands = []
    for document in DOCUMENTS:
        name = document.relative_to(REPO_ROOT).as_posix()
        code = code_text(document.read_text())
        for line in code.command_lines:
            commands += commands_in(line, name)
        for line in code.reference_lines:
            commands += references_in(line, name)
        for span in code.spans:
            span_commands = commands_in(span, name)
            commands += [Command(c.document, c.words, reference=len(c.words) == 3) for c in span_commands]
    return commands


def substituted(command: Command, arguments: list[str]) -> list[str]:
    """The arguments with every placeholder replaced; other words in capitals are an error."""
    out = []
    for word in arguments:
        value = word.split("=", 1)[1] if word.startswith("--") and "=" in word else word
        if value in PLACEHOLDERS:
            word = word[: len(word) - len(value)] + PLACEHOLDERS[value]
        elif CAPITALS.fullmatch(value):
            pytest.fail(f"{command}: {value!r} looks like a placeholder but is not one of {sorted(PLACEHOLDERS)}")
        out.append(word)
    return out


class _Parsed(Exception):
    """Raised by the patched `parse_args` once the real parser has accepted the arguments."""


def entry_module(name: str):
    """The module `python -m name` runs (a package runs its `__main__`)."""
    spec = importlib.util.find_spec(name)
    assert spec is not None, f"no module {name}"
    return importlib.import_module(f"{name}.__main__" if spec.submodule_search_locations else name)


def parse_with_real_parser(command: Command, module_name: str, arguments: list[str], monkeypatch) -> None:
    module = entry_module(module_name)
    if hasattr(module, "build_parser"):
        try:
            module.build_parser().parse_args(arguments)
        except SystemExit as exit_:  # `--help` exits 0 once it has printed
            assert exit_.code == 0, f"{command}: its parser refuses the arguments (exit {exit_.code}); see stderr"
        return
    assert hasattr(module, "main"), f"{command}: {module.__name__} has neither build_parser nor main"
    original = argparse.ArgumentParser.parse_args

    def parse_then_stop(parser, args=None, namespace=None):
        raise _Parsed(original(parser, args, namespace))

    monkeypatch.setattr(argparse.ArgumentParser, "parse_args", parse_then_stop)
    monkeypatch.setattr(sys, "argv", [module_name, *arguments])
    takes_argv = bool(inspect.signature(module.main).parameters)
    try:
        module.main(arguments) if takes_argv else module.main()
    except _Parsed:
        return
    except SystemExit as exit_:
        assert exit_.code == 0, f"{command}: its parser refuses the arguments (exit {exit_.code}); see stderr"
        return
    pytest.fail(f"{command}: {module.__name__}.main returned without parsing its arguments")


COMMANDS = all_commands()


def test_the_documents_name_commands_of_every_kind():
    kinds = {command.words[1] if command.words[0] == "python" else "bash" for command in COMMANDS}
    assert {"-m", "bash"} <= kinds and any(c.words[1].startswith("benchmarks/") for c in COMMANDS)


@pytest.mark.parametrize("command", COMMANDS, ids=str)
def test_command_is_real(command: Command, monkeypatch):
    words = list(command.words)
    if words[0] == "bash":
        assert (REPO_ROOT / words[1]).is_file(), f"{command}: no {words[1]}"
        return
    if words[1] != "-m":
        script = REPO_ROOT / words[1]
        assert script.is_file(), f"{command}: no {words[1]}"
        source = script.read_text()
        flags = [word.split("=", 1)[0] for word in words[2:] if word.startswith("--")]
        undeclared = [flag for flag in flags if f'"{flag}"' not in source]
        assert undeclared == [], f"{command}: {words[1]} declares no {undeclared}"
        return
    assert len(words) > 2, f"{command}: `python -m` names no module"
    module_name, arguments = words[2], words[3:]
    assert importlib.util.find_spec(module_name) is not None, f"{command}: no module {module_name}"
    if module_name.split(".")[0] not in PROJECT_PACKAGES or command.reference:
        return
    parse_with_real_parser(command, module_name, substituted(command, arguments), monkeypatch)


def repository_paths(markdown: str) -> set[str]:
    return {match.rstrip(".,:;") for match in PATH.findall(markdown)}


def heading_ids(markdown: str) -> set[str]:
    """GitHub's ids of the headings: lower case, punctuation dropped, spaces to hyphens."""
    headings = re.findall(r"^#{1,6} (.+)$", FENCE.sub("", markdown), re.M)
    return {re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-") for heading in headings}


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda path: path.relative_to(REPO_ROOT).as_posix())
def test_named_paths_and_links_exist(document: Path):
    text = document.read_text()
    missing = sorted(path for path in repository_paths(text) if not (REPO_ROOT / path).exists())
    assert missing == [], f"{document.name} names paths that do not exist"
    broken = []
    for target in LINK.findall(text):
        if re.match(r"[a-z]+:", target):
            continue
        file_part, _, anchor = target.partition("#")
        linked = (document.parent / file_part).resolve() if file_part else document
        if not linked.exists():
            broken.append(target)
        elif anchor and linked.suffix == ".md" and anchor not in heading_ids(linked.read_text()):
            broken.append(target)
    assert broken == [], f"{document.name}: links to missing files or headings"


def test_the_checks_read_commands_paths_and_anchors():
    markdown = (
        "Run `python -m sweeps.laws --study NAME` or see `python -m pipeline.prep`.\n\n"
        "```bash\nray job submit --working-dir . -- \\\n  python -m sweeps.scaling --grid size  # a study\n"
        "bash scripts/test.sh -m 'not slow' && echo done\n```\n\n"
        "## Outside models (`sweeps.external`)\n\nSee tests/models/<family>/ and docs/results.md.\n"
    )
    code = code_text(markdown)
    found = [c.words for line in code.command_lines for c in commands_in(line, "x")]
    assert found == [
        ("python", "-m", "sweeps.scaling", "--grid", "size"),
        ("bash", "scripts/test.sh", "-m", "not slow"),
    ]
    inline = [c.words for span in code.spans for c in commands_in(span, "x")]
    assert inline == [("python", "-m", "sweeps.laws", "--study", "NAME"), ("python", "-m", "pipeline.prep")]
    tree = "```text\nlaws/\n  __main__.py  `python -m sweeps.laws`: refit a study's laws\n```\n"
    (reference,) = [c for line in code_text(tree).reference_lines for c in references_in(line, "x")]
    assert reference.words == ("python", "-m", "sweeps.laws") and reference.reference
    assert repository_paths(markdown) == {"scripts/test.sh", "tests/models/", "docs/results.md"}
    assert "outside-models-sweepsexternal" in heading_ids(markdown)


def test_placeholders_are_substituted_and_unknown_capitals_refused():
    command = Command("x", ())
    assert substituted(command, ["--study", "NAME", "--rankme-n=N"]) == ["--study", "masks", "--rankme-n=4"]
    with pytest.raises(pytest.fail.Exception, match="RUN_NAME"):
        substituted(command, ["--run-name", "RUN_NAME"])


def test_readme_stays_short():
    lines = (REPO_ROOT / "README.md").read_text().count("\n")
    assert lines <= README_MAX_LINES, f"README.md has {lines} lines; move detail into docs/"
