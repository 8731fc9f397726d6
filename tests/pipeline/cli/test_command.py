"""Every command comes in through one front door (pipeline.cli.command): its parser is built from a
config's flags, its errors are one line prefixed with `python -m MODULE`, and it has a console script."""

from __future__ import annotations

import importlib
import tomllib
from pathlib import Path

import pytest

from pipeline.cli.command import Command

REPO_ROOT = Path(__file__).resolve().parents[3]
# Each command module and its console script; `audioscale-study` is the earlier name of `-scaling`.
COMMANDS = {
    "pipeline.corpus.__main__": "audioscale-corpus",
    "pipeline.prep.__main__": "audioscale-prep",
    "pipeline.pretrain.__main__": "audioscale-pretrain",
    "pipeline.evaluate.__main__": "audioscale-evaluate",
    "pipeline.targets.__main__": "audioscale-targets",
    "sweeps.scaling": "audioscale-scaling",
    "sweeps.laws.__main__": "audioscale-laws",
    "sweeps.advise": "audioscale-advise",
    "sweeps.external": "audioscale-external",
    "models.__main__": "audioscale-models",
}
# Every command that takes --help; the rehearsal is a developer's, without a console script.
ALL_COMMANDS = [*COMMANDS, "cluster.rehearsal.__main__"]
# `python -m models` sits on the bottom floor, below `pipeline.cli`: plain argparse, the same prog.
FRONT_DOOR_COMMANDS = [name for name in ALL_COMMANDS if name != "models.__main__"]


def _scripts() -> dict[str, str]:
    return tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]["scripts"]


def _entry(module_name: str):
    """The command's console-script function: `main` for sweeps.scaling (run_cli inside), else `cli`."""
    module = importlib.import_module(module_name)
    return module.main if module_name == "sweeps.scaling" else module.cli


@pytest.mark.parametrize("module_name", FRONT_DOOR_COMMANDS)
def test_each_command_is_named_after_its_module(module_name):
    command = importlib.import_module(module_name).COMMAND
    assert isinstance(command, Command)
    assert command.module == module_name.removesuffix(".__main__")
    assert command.prog == f"python -m {command.module}"


def test_every_command_has_its_console_script_and_each_script_a_command():
    scripts = _scripts()
    for module_name, script in COMMANDS.items():
        function = "main" if module_name == "sweeps.scaling" else "cli"
        assert scripts[script] == f"{module_name}:{function}"
    assert scripts["audioscale-study"] == scripts["audioscale-scaling"]
    assert {target.split(":")[0] for target in scripts.values()} == set(COMMANDS)


@pytest.mark.parametrize("module_name", ALL_COMMANDS)
def test_a_mistyped_flag_is_refused_with_the_command_as_prefix(module_name, capsys, monkeypatch):
    subcommand = ["tasks"] if module_name == "pipeline.corpus.__main__" else []
    monkeypatch.setattr("sys.argv", ["prog", *subcommand, "--no-such-flag"])
    with pytest.raises(SystemExit) as exit_:
        _entry(module_name)()
    assert exit_.value.code == 2
    last = capsys.readouterr().err.strip().splitlines()[-1]
    prog = f"python -m {module_name.removesuffix('.__main__')}"
    assert last.startswith(f"{prog}: error: ") and "--no-such-flag" in last


@pytest.mark.parametrize(
    ("module_name", "argv", "names"),
    [
        ("pipeline.targets.__main__", ["--shards", "{missing}"], "is not a finished shard directory"),
        ("pipeline.pretrain.__main__", ["--steps", "0"], "--steps must be at least 1"),
        ("pipeline.prep.__main__", ["--input", "{missing}", "--output", "{missing}"], "{missing}"),
        ("pipeline.evaluate.__main__", ["--checkpoint", "{missing}"], "is not a model checkpoint"),
        ("pipeline.corpus.__main__", ["baseline", "--tasks", "{missing}"], "has no tasks.json"),
        ("sweeps.advise", ["--study", "s", "--budget", "-1e20"], "the budget must be a positive"),
        ("sweeps.scaling", ["--grid", "mask_ratio", "--gpu", "h100"], "price a plan; add --plan"),
        ("cluster.rehearsal.__main__", ["--only", "nope"], "no rehearsal stage 'nope'"),
    ],
)
def test_a_user_error_is_one_line_with_the_same_prefix(module_name, argv, names, tmp_path, capsys, monkeypatch):
    missing = str(tmp_path / "missing")
    monkeypatch.setattr("sys.argv", ["prog", *(arg.format(missing=missing) for arg in argv)])
    assert _entry(module_name)() == 2
    err = capsys.readouterr().err.strip().splitlines()
    prog = f"python -m {module_name.removesuffix('.__main__')}"
    assert err[-1].startswith(f"{prog}: error: ") and names.format(missing=missing) in err[-1]
