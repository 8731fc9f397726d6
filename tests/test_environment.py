"""The developer environment: the README's activation line, the editable install, the entry points."""

from __future__ import annotations

import ast
import os
import re
import shutil
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
        for name in (
            "corpus",
            "prep",
            "pretrain",
            "evaluate",
            "targets",
            "scaling",
            "study",  # the earlier name of audioscale-scaling
            "laws",
            "advise",
            "models",
            "external",
        )
    }
    for name, target in scripts.items():
        module, function = target.split(":")
        spec = find_spec(module)  # imports the parent packages only, not the (heavy) module itself
        assert spec is not None and spec.origin, (name, module)
        tree = ast.parse(Path(spec.origin).read_text())
        functions = {node.name: node for node in tree.body if isinstance(node, ast.FunctionDef)}
        assert function in functions, (name, target)
        # Every command's user errors: one line, exit 2, through the front door (pipeline.cli.command);
        # `models` sits below it and has only argparse's usage errors.
        if name != "audioscale-models":
            assert "COMMAND.run(" in ast.unparse(functions[function]), (name, "the script bypasses its Command")
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


def _copy_checkout(destination: Path) -> Path:
    """The checkout's files as they are now (tracked and new, committed or not), without .venv."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=REPO_ROOT,
        capture_output=True,
        check=True,
    ).stdout.split(b"\0")
    for name in filter(None, (entry.decode() for entry in listed)):
        source = REPO_ROOT / name
        if source.is_file():
            (destination / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, destination / name)
    return destination


def _imported_from(checkout: Path, tmp_path: Path) -> str:
    """Where `import pipeline` resolves in a clean new shell after the checkout's activation line,
    run from outside any checkout (only the editable install can find it there)."""
    done = subprocess.run(
        [
            "env",
            "-i",
            f"HOME={os.environ['HOME']}",
            "PATH=/usr/local/bin:/usr/bin:/bin",
            "bash",
            "--noprofile",
            "--norc",
            "-c",
            f"{ACTIVATE.replace('.venv', str(checkout / '.venv'))} && cd {tmp_path} && "
            "python -c 'import pipeline; print(pipeline.__file__)'",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_two_checkouts_on_one_machine_each_run_their_own_code(tmp_path):
    """Clones share the pinned packages but never each other's code: each has its own .venv with its
    own editable install, so making the environment in one leaves the other's untouched."""
    first = _copy_checkout(tmp_path / "first")
    second = _copy_checkout(tmp_path / "second")
    environment = {key: value for key, value in os.environ.items() if not key.startswith(("VIRTUAL_ENV", "PYTHON"))}
    for checkout in (first, second):  # the second one last: it once took the shared install over
        made = subprocess.run(
            ["bash", "-c", "source scripts/env.sh"], cwd=checkout, env=environment, capture_output=True, text=True
        )
        assert made.returncode == 0, made.stdout + made.stderr
        assert (checkout / ".venv").is_dir() and not (checkout / ".venv").is_symlink()
    assert _imported_from(first, tmp_path) == str(first / "pipeline" / "__init__.py")
    assert _imported_from(second, tmp_path) == str(second / "pipeline" / "__init__.py")
    # Small: the pinned packages are read from the shared venv, not installed again.
    size = sum(path.stat().st_size for path in (first / ".venv").rglob("*") if path.is_file() and not path.is_symlink())
    assert size < 5_000_000


# Standard-library names newer than Python 3.11 (what's new in 3.12 and 3.13), found by name.
NEWER_THAN_311 = {
    ("itertools", "batched"),
    ("typing", "override"),
    ("typing", "TypeAliasType"),
    ("warnings", "deprecated"),
    ("copy", "replace"),
    ("calendar", "Month"),
}


def test_requires_python_covers_311_to_313_and_the_code_uses_nothing_newer_than_311():
    """pip refused Python 3.12 and 3.13 (Ubuntu 24.04's and the GPU machines'), although the pins
    publish wheels for both (`pip install --dry-run --only-binary=:all: --python-version 3.13 -r
    requirements-dev.txt` resolves); the code must still run on 3.11, the oldest allowed."""
    from packaging.specifiers import SpecifierSet

    allowed = SpecifierSet(PYPROJECT["project"]["requires-python"])
    assert all(version in allowed for version in ("3.11.2", "3.12.3", "3.13.1"))
    assert "3.10.12" not in allowed
    files = [
        path
        for root in ("pipeline", "models", "sweeps", "benchmarks", "tests", "scripts")
        for path in (REPO_ROOT / root).rglob("*.py")
    ]
    assert len(files) > 300
    for path in files:
        tree = ast.parse(path.read_text(), filename=str(path), feature_version=(3, 11))  # 3.12+ syntax fails
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module:
                used = {(node.module, alias.name) for alias in node.names}
            elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
                used = {(node.value.id, node.attr)}
            else:
                continue
            assert not used & NEWER_THAN_311, (
                f"{path.relative_to(REPO_ROOT)}:{node.lineno} uses {used & NEWER_THAN_311}"
            )


def _tiny_wheel(folder: Path) -> Path:
    """A one-module pure-Python wheel built by hand: an install that needs no build step or index."""
    import base64
    import hashlib
    import zipfile

    files = {
        "audioscale_probe_pkg/__init__.py": "VALUE = 7\n",
        "audioscale_probe_pkg-0.1.dist-info/METADATA": "Metadata-Version: 2.1\nName: audioscale-probe-pkg\nVersion: 0.1\n",
        "audioscale_probe_pkg-0.1.dist-info/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    digests = [
        f"{name},sha256={base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b'=').decode()},{len(text)}"
        for name, text in files.items()
    ]
    files["audioscale_probe_pkg-0.1.dist-info/RECORD"] = "\n".join(
        [*digests, "audioscale_probe_pkg-0.1.dist-info/RECORD,,"]
    )
    wheel = folder / "audioscale_probe_pkg-0.1-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        for name, text in files.items():
            archive.writestr(name, text)
    return wheel


def test_the_pins_go_in_with_pip_where_pip_is_pointed_at_another_index(tmp_path):
    """uv does not read pip's configuration: with PIP_INDEX_URL set (a mirror, a proxy) env.sh's
    install_pins must use pip, and the pins must land all the same (here a local wheel)."""
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "requirements-dev.txt").write_text(f"{_tiny_wheel(tmp_path)}\n")
    venv = tmp_path / "venv"
    subprocess.run(["python3", "-m", "venv", str(venv)], check=True)
    function = re.search(r"^install_pins\(\) \{.*?^\}", (REPO_ROOT / "scripts" / "env.sh").read_text(), re.S | re.M)
    script = f"{function.group(0)}\nVENV_DIR={venv} REPO_ROOT={repo} install_pins"
    # The index is PyPI's own address, given the way a mirror is: pip still reaches it for its own upgrade.
    environment = {**os.environ, "PIP_INDEX_URL": "https://pypi.org/simple"}
    installed = subprocess.run(["bash", "-c", script], env=environment, capture_output=True, text=True)
    assert installed.returncode == 0, installed.stdout + installed.stderr
    assert "[env] installing the pins with pip" in installed.stdout
    assert not (venv / "bin" / "uv").exists()  # uv was not even fetched
    probe = subprocess.run([venv / "bin" / "python", "-c", "import audioscale_probe_pkg as p; print(p.VALUE)"],
                           capture_output=True, text=True)  # fmt: skip
    assert probe.stdout.strip() == "7", probe.stderr
